import ArgumentParser
import BrokerOptions
import Foundation
import Logging
import MQTTClient
import Metrics
import Prometheus
import RideAccess
import RidePush
import RidePushService
import RideStatusKit
import ServiceLifecycle
import UnixSignals

/// `ride-push`: Live Activities on iPhone and Live Updates on Android from the ride-status stream (issue 32).
/// Thin: flags in, logging and metrics bootstrapped, the MQTT client, the senders, the service and its HTTP side
/// run in one service group until SIGTERM or SIGINT.
@main
struct RidePushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ride-push",
        abstract: "Pushes ride statuses to lock screens: APNs Live Activities and FCM Live Updates.",
        discussion: """
            Devices register over HTTP with the ride's share token (POST /v1/rides/{ride}/devices); ride-push \
            subscribes to those rides' statuses and pushes each registered device the newest state. Give APNs, \
            FCM or both. See docs/PUSH.md.
            """)

    @OptionGroup var access: BrokerOptions
    @Option(help: "Address of the registration API, /metrics and /healthz.") var httpHost = "127.0.0.1"
    @Option(help: "Port of the registration API; 0 picks a free one (printed at start).") var httpPort = 8090
    @Option(help: "JSON Web Key Set of the share keys (the workers' http.shareKeys): registrations prove a ride.")
    var shareKeys: String

    @Option(help: "APNs base URL.") var apnsURL = "https://\(APNs.productionHost)"
    @Option(help: "APNs signing key (.p8) for token authentication; APNs is off without one.") var apnsKey: String?
    @Option(help: "The key's id (the provider token's kid).") var apnsKeyID: String?
    @Option(help: "The Apple developer team (the provider token's iss).") var teamID: String?
    @Option(help: "The app's bundle identifier (the topic is <bundle>.push-type.liveactivity).") var bundleID: String?
    @Option(help: "CA certificates to trust for APNs instead of the system's (a stand-in).") var apnsCAFile: String?

    @Option(help: "FCM base URL.") var fcmURL = "https://\(FCM.host)"
    @Option(help: "A service account's JSON key for FCM HTTP v1; FCM is off without one.") var fcmAccount: String?
    @Option(help: "The Firebase project (default: the key's project_id).") var fcmProject: String?
    @Option(help: "CA certificates to trust for FCM and its token endpoint instead of the system's.")
    var fcmCAFile: String?

    @Option(help: "Devices a ride may have.") var maximumDevices = PushPlanner.Settings().maximumDevicesPerRide
    @Option(help: "Priority-10 pushes per activity per hour.") var urgentPerHour = PushPlanner.Settings()
        .urgentPushesPerHour
    @Option(help: "Seconds between priority-5 pushes at least; the stale-date is issuedAt plus twice the refresh.")
    var minimumInterval = PushPlanner.Settings().minimumInterval
    @Option(help: "Seconds between pushes at most while statuses arrive.") var refreshInterval = PushPlanner.Settings()
        .refreshInterval
    @Option(help: "Seconds an ended activity stays on the lock screen.") var dismissalDelay = PushPlanner.Settings()
        .dismissalDelay
    @Option(help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"
    @Option(
        help: """
            This process's id among the ride-push processes sharing the rides (default: ride-push-<host>-<http port>, \
            stable across restarts and unique per host).
            """)
    var memberID: String?

    func validate() throws {
        if apnsKey != nil, apnsKeyID == nil || teamID == nil || bundleID == nil {
            throw ValidationError("--apns-key needs --apns-key-id, --team-id and --bundle-id")
        }
        if apnsKey == nil, fcmAccount == nil {
            throw ValidationError("give --apns-key, --fcm-account or both: there is nowhere to push")
        }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level \(logLevel)") }
        guard minimumInterval > 0, refreshInterval >= minimumInterval, urgentPerHour >= 0, maximumDevices > 0 else {
            throw ValidationError("intervals are positive with --refresh-interval at least --minimum-interval")
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let logger = Logger(label: "ride-push")
        let now: @Sendable () -> Date = { Date() }

        let verifier: ShareLinks.Verifier
        let apns: APNsSender?
        let fcm: FCMSender?
        do {
            verifier = try await ShareLinks.Verifier(jwks: try String(contentsOfFile: shareKeys, encoding: .utf8))
            apns = try await apnsKey.asyncMap { key in
                try await APNsSender(
                    configuration: .init(
                        baseURL: apnsURL, bundleIdentifier: bundleID!, teamIdentifier: teamID!,
                        keyIdentifier: apnsKeyID!, privateKeyPEM: try String(contentsOfFile: key, encoding: .utf8),
                        trustRootsFile: apnsCAFile), now: now, logger: logger)
            }
            fcm = try await fcmAccount.asyncMap { account in
                try await FCMSender(
                    configuration: .init(
                        baseURL: fcmURL, serviceAccountJSON: try String(contentsOfFile: account, encoding: .utf8),
                        project: fcmProject, trustRootsFile: fcmCAFile), now: now, logger: logger)
            }
        } catch {
            FileHandle.standardError.write(Data("ride-push: \(error)\n".utf8))
            throw ExitCode(2)
        }

        var settings = RidePushService.Settings()
        settings.group.planner.maximumDevicesPerRide = maximumDevices
        settings.group.planner.urgentPushesPerHour = urgentPerHour
        settings.group.planner.minimumInterval = minimumInterval
        settings.group.planner.refreshInterval = refreshInterval
        settings.group.planner.dismissalDelay = dismissalDelay
        let member = memberID ?? "ride-push-\(ProcessInfo.processInfo.hostName)-\(httpPort)"
        // The will: this connection's offline presence, so the others take its rides at once (G1's pattern).
        let goodbye = Presence(state: .offline, since: now(), version: settings.version)
        var configuration = try access.configuration(clientID: member)
        configuration.will = .init(
            topic: settings.topics.pushMember(member), payload: goodbye.encoded(), retain: true,
            payloadForIncarnation: { incarnation in
                var will = goodbye
                will.incarnation = Int(clamping: incarnation)
                return will.encoded()
            })
        let client = try MQTTClient(configuration: configuration, logger: logger)
        let sendAPNs: (@Sendable (Push) async -> PushPlanner.Outcome)? = apns.map { sender in
            { @Sendable push in await sender.send(push) }
        }
        let sendFCM: (@Sendable (Push) async -> PushPlanner.Outcome)? = fcm.map { sender in
            { @Sendable push in await sender.send(push) }
        }
        let service = RidePushService(
            member: member, settings: settings,
            senders: .init(
                apns: sendAPNs, fcm: sendFCM,
                renew: { service in
                    switch service {
                    case .apns:
                        if await apns?.providerTokenExpired() == true {
                            logger.warning(
                                "APNs called a provider token younger than 20 minutes expired: is this host's clock right?"
                            )
                        }
                    case .fcm: await fcm?.accessTokenRefused()
                    }
                }),
            broker: .init(
                subscribe: { try await client.subscribe($0, qos: .atLeastOnce) },
                unsubscribe: { try await client.unsubscribe($0) },
                publish: { topic, payload, retain in
                    try await client.publish(topic: topic, payload: payload, qos: .atLeastOnce, retain: retain)
                }),
            now: now, logger: logger)
        let http = RegistrationServer(
            host: httpHost, port: httpPort, service: service, verifier: verifier, now: now,
            metricsText: { registry.emitToString() }, logger: logger)
        let connection = BrokerConnection(client: client, service: service, logger: logger)
        let group = ServiceGroup(
            configuration: .init(
                services: [
                    .init(service: connection), .init(service: service),
                    .init(service: http, failureTerminationBehavior: .gracefullyShutdownGroup),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        try? await apns?.shutdown()
        try? await fcm?.shutdown()
    }
}

/// The MQTT client as a service: started first, its messages and connection changes handed to the push
/// service; at shutdown it says goodbye (an offline presence: a clean disconnect publishes no will) and
/// disconnects last.
struct BrokerConnection: Service {
    let client: MQTTClient
    let service: RidePushService
    let logger: Logger

    func run() async throws {
        client.start()
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await message in client.messages {
                    service.received(topic: message.topic, payload: message.payload)
                }
            }
            group.addTask {
                for await event in client.events {
                    switch event {
                    case .subscriptionsRestored(let incarnation, _): service.connected(incarnation: incarnation)
                    case .disconnected(let reason):
                        logger.warning("lost the broker; serving nothing until back", metadata: ["reason": "\(reason)"])
                        service.disconnected()
                    case .trouble(let trouble): logger.warning("MQTT client: \(trouble)")
                    case .refused(let error): logger.error("the broker refused ride-push: \(error)")
                    default: break
                    }
                }
            }
            try? await gracefulShutdown()
            let (topic, payload) = service.presence(online: false, incarnation: client.incarnation, now: Date())
            try? await client.publish(topic: topic, payload: payload, qos: .atLeastOnce, retain: true)
            await client.disconnect()
        }
    }
}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async throws -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
