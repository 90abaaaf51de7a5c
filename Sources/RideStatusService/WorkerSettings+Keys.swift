import Foundation
import Logging
import MQTTClient
import RideAccess
import RideDomain
import SettingsLayers

import struct RideStatusKit.CompletionStatus
import struct RideStatusKit.RideTopics

// MARK: - The key table: each key in the file's spelling, how its text is read, and its unit

extension WorkerSettings {
    /// The keys, in the file's spelling, with how to apply a string value.
    static let keys: [String: SettingsLayers<WorkerSettings>.Setter] = [
        "broker.url": { $0.brokerURL = $1 },
        "broker.username": { $0.username = $1 },
        "broker.password": { $0.password = $1 },
        "broker.passwordFile": { $0.passwordFile = $1 },
        "broker.caFile": { $0.caFile = $1 },
        "broker.certificateFile": { $0.certificateFile = $1 },
        "broker.keyFile": { $0.keyFile = $1 },
        "broker.sessionExpiry": {
            $0.sessionExpiry = UInt32(try SettingValue.number($1, "broker.sessionExpiry", 0...4_294_967_295, .seconds))
        },
        "broker.protocol": { settings, value in
            guard let version = MQTTConfiguration.ProtocolVersion(setting: value) else {
                throw Problem(key: "broker.protocol", message: "'\(value)' is not 5 or 3.1.1")
            }
            settings.protocolVersion = version
        },
        "broker.keepAlive": { $0.keepAlive = Int(try SettingValue.number($1, "broker.keepAlive", 2...600, .seconds)) },
        "broker.lease": { $0.lease = try SettingValue.flag($1, "broker.lease") },
        "broker.leaseMargin": {
            $0.leaseMargin = .milliseconds(
                Int(try SettingValue.number($1, "broker.leaseMargin", 0.1...60, .seconds) * 1000))
        },
        "broker.dotsInTopics": { $0.ride.dotsInTopics = try SettingValue.flag($1, "broker.dotsInTopics") },
        "broker.interposeIO": { $0.interposeIO = try SettingValue.flag($1, "broker.interposeIO") },
        "worker.takeoverReadsStatuses": {
            $0.takeoverReadsStatuses = try SettingValue.flag($1, "worker.takeoverReadsStatuses")
        },
        "group.authority": { settings, value in
            guard let authority = GroupAuthority(rawValue: value) else {
                throw Problem(key: "group.authority", message: "'\(value)' is not broker or etcd (G6)")
            }
            settings.authority = authority
        },
        "group.etcdEndpoints": { settings, value in
            let endpoints = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
            for endpoint in endpoints
            where !(endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://")) || URL(string: endpoint) == nil {
                throw Problem(key: "group.etcdEndpoints", message: "'\(endpoint)' is not an http:// or https:// URL")
            }
            settings.etcdEndpoints = endpoints
        },
        "group.etcdPrefix": { settings, value in
            guard value.hasPrefix("/"), value.hasSuffix("/") else {
                throw Problem(key: "group.etcdPrefix", message: "'\(value)' must begin and end with /")
            }
            settings.etcdPrefix = value
        },
        "group.etcdLeaseTTL": {
            $0.etcdLeaseTTL = Int(try SettingValue.number($1, "group.etcdLeaseTTL", 3...60, .seconds))
        },
        "group.etcdReleaseWait": {
            $0.etcdReleaseWait = Int(try SettingValue.number($1, "group.etcdReleaseWait", 0...120, .seconds))
        },
        "worker.id": { $0.workerID = $1 },
        "worker.stateDir": { $0.stateDirectory = $1 },
        "worker.logLevel": { $0.logLevel = try SettingValue.choice($1, "worker.logLevel") },
        "metrics.host": { $0.metricsHost = $1 },
        "metrics.port": { $0.metricsPort = Int(try SettingValue.number($1, "metrics.port", 0...65_535)) },
        "http.webRoot": { $0.webRoot = $1 },
        "http.leaflet": { $0.leafletDirectory = $1 },
        "http.tileURL": { $0.tileURL = $1 },
        "http.tileAttribution": { $0.tileAttribution = $1 },
        "http.streets": { $0.streets = $1 == "none" ? "" : $1 },
        "http.streetsAttribution": { $0.streetsAttribution = $1 },
        "http.readAPI": { $0.readAPI = try SettingValue.flag($1, "http.readAPI") },
        "http.shareKeys": { $0.shareKeys = $1 == "none" ? "" : $1 },
        "http.operatorTokenFile": { $0.operatorTokenFile = $1 == "none" ? "" : $1 },
        "http.allowedHosts": { settings, value in
            do {
                settings.allowedHosts = try AllowedHosts.settingList(value)
            } catch { throw Problem(key: "http.allowedHosts", message: "\(error)") }
        },
        "topics.fleetPrefix": { $0.topics.fleetPrefix = $1 },
        "topics.ridesPrefix": { $0.topics.ridesPrefix = $1 },
        "topics.serviceName": { $0.topics.serviceName = $1 },
        "topics.rideOptionsPrefix": { $0.topics.rideOptionsPrefix = $1 },
        "topics.replyPrefix": { $0.topics.replyPrefix = $1 },
        "rideOptions.catalog": { settings, value in
            settings.rideOptionsCatalogPath = value
            settings.catalogChosen = true
        },
        "rides.updateInterval": {
            $0.ride.updateInterval = try SettingValue.number($1, "rides.updateInterval", 0.1...20, .seconds)
        },
        "rides.staleAfter": {
            $0.ride.staleAfter = try SettingValue.number($1, "rides.staleAfter", 1...3600, .seconds)
        },
        "rides.maxPayloadBytes": {
            $0.ride.maxPayloadBytes = Int(try SettingValue.number($1, "rides.maxPayloadBytes", 256...1_048_576, .bytes))
        },
        "rides.futureTolerance": {
            $0.ride.futureTolerance = try SettingValue.number($1, "rides.futureTolerance", 0...3600, .seconds)
        },
        "rides.maxFixAge": { $0.ride.maxFixAge = try SettingValue.number($1, "rides.maxFixAge", 1...86_400, .seconds) },
        "rides.maxSpeed": {
            $0.ride.maxSpeed = try SettingValue.number($1, "rides.maxSpeed", 1...400, .metresPerSecond)
        },
        "rides.maxAccuracy": {
            $0.ride.maxAccuracy = try SettingValue.number($1, "rides.maxAccuracy", 1...10_000, .metres)
        },
        "rides.approachingWithin": {
            $0.ride.approachingWithin = try SettingValue.number($1, "rides.approachingWithin", 0...3600, .seconds)
        },
        "rides.approachingDistance": {
            $0.ride.approachingDistance = try SettingValue.number($1, "rides.approachingDistance", 0...100_000, .metres)
        },
        "rides.arrivalRadius": {
            $0.ride.arrivalRadius = try SettingValue.number($1, "rides.arrivalRadius", 1...1000, .metres)
        },
        "rides.maxPickupWait": {
            $0.ride.maxPickupWait = try SettingValue.number($1, "rides.maxPickupWait", 1...7200, .seconds)
        },
        "rides.detourFactor": { $0.ride.detourFactor = try SettingValue.number($1, "rides.detourFactor", 1...5) },
        "rides.detourFactorMinimum": {
            $0.ride.detourFactorMinimum = try SettingValue.number($1, "rides.detourFactorMinimum", 1...5)
        },
        "rides.detourFactorMaximum": {
            $0.ride.detourFactorMaximum = try SettingValue.number($1, "rides.detourFactorMaximum", 1...5)
        },
        "rides.detourLearningRate": {
            $0.ride.detourLearningRate = try SettingValue.number($1, "rides.detourLearningRate", 0...1)
        },
        "rides.speedFloor": {
            $0.ride.speedFloor = try SettingValue.number($1, "rides.speedFloor", 0.1...100, .metresPerSecond)
        },
        "rides.speedTimeConstant": {
            $0.ride.speedTimeConstant = try SettingValue.number($1, "rides.speedTimeConstant", 1...3600, .seconds)
        },
        "rides.stopShareTimeConstant": {
            $0.ride.stopShareTimeConstant = try SettingValue.number(
                $1, "rides.stopShareTimeConstant", 1...3600, .seconds)
        },
        "rides.stopShareLearningRate": {
            $0.ride.stopShareLearningRate = try SettingValue.number($1, "rides.stopShareLearningRate", 0...1)
        },
        "rides.priorsShareInterval": {
            $0.ride.priorsShareInterval = try SettingValue.number($1, "rides.priorsShareInterval", 0...3600, .seconds)
        },
        "rides.timeZone": { settings, value in
            // UTC as nil: counted without loading Foundation's zone tables (2.4 MiB and more).
            if AreaLearning.utcNames.contains(value) {
                settings.ride.timeZone = nil
                return
            }
            guard let zone = TimeZone(identifier: value) else {
                throw Problem(
                    key: "rides.timeZone", message: "'\(value)' is not an IANA time zone (Europe/Berlin, UTC)")
            }
            settings.ride.timeZone = zone
        },
        "rides.hoursOfWeek": { $0.ride.hoursOfWeek = try SettingValue.flag($1, "rides.hoursOfWeek") },
        "rides.typicalStopShare": {
            $0.ride.typicalStopShare = try SettingValue.number($1, "rides.typicalStopShare", 0...0.9)
        },
        "rides.typicalSpeed": {
            $0.ride.typicalSpeed = try SettingValue.number($1, "rides.typicalSpeed", 0.1...100, .metresPerSecond)
        },
        "rides.estimateDelayLimit": {
            $0.ride.estimateDelayLimit = try SettingValue.number($1, "rides.estimateDelayLimit", 0...3600, .seconds)
        },
        "rides.completedLinger": {
            $0.ride.completedLinger = try SettingValue.number($1, "rides.completedLinger", 0...86_400, .seconds)
        },
        "rides.maxRideDuration": {
            $0.ride.maxRideDuration = try SettingValue.number($1, "rides.maxRideDuration", 60...604_800, .seconds)
        },
        "rides.deadLettersPerSecond": {
            $0.ride.deadLettersPerSecond = try SettingValue.number(
                $1, "rides.deadLettersPerSecond", 1...10_000, .perSecond)
        },
        "rides.trackLength": { $0.ride.trackLength = Int(try SettingValue.number($1, "rides.trackLength", 0...1000)) },
        "rides.sequenceBlock": {
            $0.ride.sequenceBlock = Int(try SettingValue.number($1, "rides.sequenceBlock", 1...1_000_000))
        },
        "rides.feedbackTypes": { settings, value in
            let types = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
            let known = types.compactMap(CompletionStatus.FeedbackType.init(rawValue:))
            guard known.count == types.count else {
                throw Problem(key: "rides.feedbackTypes", message: "'\(value)' may only list rate and tip")
            }
            settings.ride.feedbackTypes = known
        },
    ]
}
