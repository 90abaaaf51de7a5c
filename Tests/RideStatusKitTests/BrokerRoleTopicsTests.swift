import Foundation
import MosquittoTesting
import RideStatusKit
import Testing

/// The broker's roles (scripts/broker_roles.py, which writes the ACL file and the dynamic security plugin's roles)
/// name topics; the one table of topics is RideStatusKit's. Every rule of every role must be a filter the table
/// builds, under the defaults and under other prefixes, so that a topic renamed in one place and not the other
/// fails here rather than as a refused subscription in production.
@Suite("2, A4: the broker's roles are built from the topic table's names")
struct BrokerRoleTopicsTests {
    /// Every filter the roles may name, built by the table: each topic with `+` (any) or `{user}` (the account's
    /// own name) in its variable level, and the multi-level filters.
    static func filters(_ topics: RideTopics) -> Set<String> {
        var filters: Set<String> = [
            topics.rideOptionsRequest, topics.deadLetter, topics.stateFilter, topics.priorsFilter,
            topics.reply(client: "#"), topics.pushDevice(ride: "+", key: "+"),
        ]
        for id in ["+", "{user}"] {
            filters.formUnion([
                topics.position(vehicle: id), topics.availability(vehicle: id), topics.vehicleEvent(vehicle: id),
                topics.status(ride: id), topics.statusRequest(ride: id), topics.presence(worker: id),
                topics.released(worker: id), topics.loadMarker(worker: id), topics.leaseMarker(worker: id),
                topics.recoveryMarker(worker: id), topics.reply(client: id) + "/#", topics.pushMember(id),
            ])
            filters.formUnion(RideTopics.Control.allCases.map { topics.control($0, ride: id) })
        }
        return filters
    }

    /// The roles broker_roles.py builds for these prefixes, by role name: (access, topic) pairs.
    static func roles(_ topics: RideTopics) async throws -> [String: [[String]]] {
        let script = checkoutRoot.appendingPathComponent("scripts/broker_roles.py").path
        let program = """
            import importlib.util, json, sys
            spec = importlib.util.spec_from_file_location("broker_roles", sys.argv[1])
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            print(json.dumps(module.roles(json.loads(sys.argv[2]))))
            """
        let prefixes = [
            "fleetPrefix": topics.fleetPrefix, "ridesPrefix": topics.ridesPrefix, "serviceName": topics.serviceName,
            "rideOptionsPrefix": topics.rideOptionsPrefix, "replyPrefix": topics.replyPrefix,
        ]
        let argument = String(decoding: try JSONEncoder().encode(prefixes), as: UTF8.self)
        let (code, output) = try await ChildProcess.run("/usr/bin/env", ["python3", "-c", program, script, argument])
        try #require(code == 0, "\(output)")
        return try JSONDecoder().decode([String: [[String]]].self, from: Data(output.utf8))
    }

    @Test(
        "2, A4: every rule of every role is a topic of RideStatusKit's table, with the contract's prefixes and others",
        arguments: [
            RideTopics(),
            RideTopics(
                fleetPrefix: "acme/fleet", ridesPrefix: "acme/rides", serviceName: "acme-status",
                rideOptionsPrefix: "acme/options", replyPrefix: "acme/replies"),
        ])
    func rolesUseTheTable(topics: RideTopics) async throws {
        let roles = try await Self.roles(topics)
        #expect(
            Set(roles.keys) == [
                "worker", "dispatch", "monitoring", "watchers", "push", "vehicles", "simulators", "rider",
            ])
        let filters = Self.filters(topics)
        for (role, rules) in roles.sorted(by: { $0.key < $1.key }) {
            #expect(!rules.isEmpty, "\(role) has no rules")
            for rule in rules {
                #expect(rule.count == 2 && ["read", "write", "readwrite"].contains(rule[0]), "\(role): \(rule)")
                #expect(filters.contains(rule.last ?? ""), "\(role)'s \(rule) is not a topic the table builds")
            }
        }
        // The grants A4 set: the workers reach their own topics and the registrations stay ride-push's.
        let worker = Set((roles["worker"] ?? []).map { $0.last ?? "" })
        #expect(worker.contains(topics.leaseMarker(worker: "+")) && worker.contains(topics.stateFilter))
        #expect(!worker.contains(topics.pushDevice(ride: "+", key: "+")), "push tokens are ride-push's alone")
        let rider = Set((roles["rider"] ?? []).map { $0.last ?? "" })
        #expect(
            rider == [
                topics.status(ride: "{user}"), topics.statusRequest(ride: "{user}"),
                topics.reply(client: "{user}") + "/#", topics.rideOptionsRequest,
            ])
    }
}
