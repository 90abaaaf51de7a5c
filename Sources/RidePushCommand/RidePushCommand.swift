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
import SettingsLayers
import UnixSignals

/// `ride-push`: Live Activities on iPhone and Live Updates on Android from the ride-status stream.
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
            FCM or both. Settings: config/ride-push.yaml, then RIDEPUSH_* environment variables, then these \
            flags. See docs/PUSH.md.
            """)

    @Option(
        help: """
            The YAML configuration file; relative paths in it resolve against its folder. \
            Default: config/ride-push.yaml here, else in the checkout the executable was built in.
            """)
    var config: String?
    @OptionGroup var access: BrokerOptions
    @Option(help: "Address of the registration API, /metrics and /healthz (http.host).") var httpHost: String?
    @Option(help: "Port of the registration API; 0 picks a free one (http.port).") var httpPort: String?
    @Option(help: "JSON Web Key Set of the share keys, the workers' http.shareKeys (http.shareKeys).")
    var shareKeys: String?
    @Option(help: "APNs base URL (apns.url).") var apnsURL: String?
    @Option(help: "APNs signing key (.p8); APNs is off without one (apns.keyFile).") var apnsKey: String?
    @Option(help: "The key's id, the provider token's kid (apns.keyId).") var apnsKeyID: String?
    @Option(help: "The Apple developer team, the provider token's iss (apns.teamId).") var teamID: String?
    @Option(help: "The app's bundle identifier (apns.bundleId).") var bundleID: String?
    @Option(help: "CA certificates to trust for APNs instead of the system's (apns.caFile).") var apnsCAFile: String?
    @Option(help: "FCM base URL (fcm.url).") var fcmURL: String?
    @Option(help: "A service account's JSON key for FCM HTTP v1; FCM is off without one (fcm.accountFile).")
    var fcmAccount: String?
    @Option(help: "The Firebase project, default the key's project_id (fcm.project).") var fcmProject: String?
    @Option(help: "CA certificates to trust for FCM and its token endpoint (fcm.caFile).") var fcmCAFile: String?
    @Option(help: "Devices a ride may have (push.maximumDevices).") var maximumDevices: String?
    @Option(help: "Priority-10 pushes per activity per hour (push.urgentPerHour).") var urgentPerHour: String?
    @Option(help: "Seconds between priority-5 pushes at least (push.minimumInterval).") var minimumInterval: String?
    @Option(help: "Seconds between pushes at most while statuses arrive (push.refreshInterval).")
    var refreshInterval: String?
    @Option(help: "Seconds an ended activity stays on the lock screen (push.dismissalDelay).")
    var dismissalDelay: String?
    @Option(help: "trace, debug, info, notice, warning, error or critical (push.logLevel).") var logLevel: String?
    @Option(
        help: """
            This process's id among the ride-push processes sharing the rides (push.memberId; default: \
            ride-push-<host>-<http port>, stable across restarts and unique per host).
            """)
    var memberID: String?
    @Option(name: .customLong("set"), help: "Any configuration key, as key=value (repeatable).")
    var assignments: [String] = []

    /// The flags given, as configuration keys: they win over the file and the environment.
    func overrides() throws -> [(String, String)] {
        // ride-push's registrations and presences use MQTT 5 (a will per incarnation): no 3.1.1 broker.
        guard MQTTConfiguration.ProtocolVersion(setting: access.protocolVersion) == .v5 else {
            throw ValidationError("ride-push speaks MQTT 5 only, not --protocol \(access.protocolVersion)")
        }
        let flags: [(String, String?)] = [
            ("broker.url", access.broker), ("broker.username", access.username),
            ("broker.passwordFile", access.passwordFile), ("broker.caFile", access.caFile),
            ("http.host", httpHost), ("http.port", httpPort), ("http.shareKeys", shareKeys),
            ("apns.url", apnsURL), ("apns.keyFile", apnsKey), ("apns.keyId", apnsKeyID), ("apns.teamId", teamID),
            ("apns.bundleId", bundleID), ("apns.caFile", apnsCAFile),
            ("fcm.url", fcmURL), ("fcm.accountFile", fcmAccount), ("fcm.project", fcmProject),
            ("fcm.caFile", fcmCAFile),
            ("push.maximumDevices", maximumDevices), ("push.urgentPerHour", urgentPerHour),
            ("push.minimumInterval", minimumInterval), ("push.refreshInterval", refreshInterval),
            ("push.dismissalDelay", dismissalDelay), ("push.logLevel", logLevel), ("push.memberId", memberID),
        ]
        var overrides = flags.compactMap { key, value in value.map { (key, $0) } }
        for assignment in assignments {
            guard let (key, value) = SettingValue.assignment(assignment) else {
                throw ValidationError("--set takes key=value, not '\(assignment)'")
            }
            overrides.append((key, value))
        }
        return overrides
    }

    func run() async throws {
        let settings: RidePushSettings
        do {
            settings = try RidePushSettings.load(file: config, overrides: try overrides())
        } catch let error as ValidationError {
            throw error
        } catch {
            FileHandle.standardError.write(Data("ride-push: \(error)\n".utf8))
            throw ExitCode(2)
        }
        let level = settings.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let logger = Logger(label: "ride-push")
        logger.info("settings read", metadata: ["file": "\(settings.configurationFile ?? "none (defaults)")"])
        let now: @Sendable () -> Date = { Date() }

        let verifier: ShareLinks.Verifier
        let apns: APNsSender?
        let fcm: FCMSender?
        do {
            verifier = try await ShareLinks.Verifier(
                jwks: try Self.read(settings.shareKeys, key: "http.shareKeys"))
            let apnsSettings = settings.apns
            apns =
                apnsSettings.keyFile.isEmpty
                ? nil
                : try await APNsSender(
                    configuration: .init(
                        baseURL: apnsSettings.url, bundleIdentifier: apnsSettings.bundleID,
                        teamIdentifier: apnsSettings.teamID, keyIdentifier: apnsSettings.keyID,
                        privateKeyPEM: try Self.read(apnsSettings.keyFile, key: "apns.keyFile"),
                        trustRootsFile: apnsSettings.caFile.isEmpty ? nil : apnsSettings.caFile,
                        renewalAge: apnsSettings.tokenRenewal), now: now, logger: logger)
            let fcmSettings = settings.fcm
            fcm =
                fcmSettings.accountFile.isEmpty
                ? nil
                : try await FCMSender(
                    configuration: .init(
                        baseURL: fcmSettings.url,
                        serviceAccountJSON: try Self.read(fcmSettings.accountFile, key: "fcm.accountFile"),
                        project: fcmSettings.project.isEmpty ? nil : fcmSettings.project,
                        trustRootsFile: fcmSettings.caFile.isEmpty ? nil : fcmSettings.caFile), now: now, logger: logger
                )
        } catch {
            FileHandle.standardError.write(Data("ride-push: \(error)\n".utf8))
            throw ExitCode(2)
        }

        let member = settings.member
        // The will: this connection's offline presence, so the others take its rides at once (G1's pattern).
        let goodbye = Presence(state: .offline, since: now(), version: settings.service.version)
        // A4: an account signs in under its own name as client id (the broker binds them), so each member of a
        // group has an account of its own; without an account, the member id.
        var configuration = try MQTTConfiguration(url: settings.brokerURL, clientID: settings.username ?? member)
        try configuration.useCredentials(
            username: settings.username, passwordFile: settings.passwordFile, caFile: settings.caFile)
        configuration.will = .init(
            topic: settings.service.topics.pushMember(member), payload: goodbye.encoded(), retain: true,
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
            member: member, settings: settings.service,
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
            host: settings.httpHost, port: settings.httpPort, hosts: settings.httpHosts, service: service,
            verifier: verifier, now: now,
            metricsText: { registry.emitToString() }, logger: logger)
        let connection = BrokerConnection(client: client, service: service, logger: logger)
        let group = ServiceGroup(
            configuration: .init(
                // Started in this order, ended in reverse at SIGTERM: the registration API first, then the push
                // service's parts (its core before what the core feeds), the broker connection last.
                services: [.init(service: connection)] + service.services + [
                    .init(service: http, failureTerminationBehavior: .gracefullyShutdownGroup)
                ],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        // The HTTP clients are shut down however the group ended: one left running traps in its deinit.
        var failure: (any Error)?
        do { try await group.run() } catch { failure = error }
        try? await apns?.shutdown()
        try? await fcm?.shutdown()
        if let failure { throw failure }
    }

    /// A file a key names, read whole; a missing one is a problem naming the key.
    static func read(_ path: String, key: String) throws -> String {
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw RidePushSettings.Problem(key: key, message: "cannot read \(path)")
        }
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
