import Foundation
import MosquittoTesting
import RideAccess
import Testing

/// A4's HTTP half: the host names the worker's server answers, alone and on the built worker.
@Suite("A4: the hosts the HTTP server answers")
struct AllowedHostsTests {
    @Test("A4: by default the loopback names and addresses at the bound port, and nothing else")
    func loopbackDefault() {
        let hosts = AllowedHosts.loopback(port: 9466)
        for allowed in ["localhost:9466", "127.0.0.1:9466", "[::1]:9466", "LOCALHOST:9466", "localhost.:9466"] {
            #expect(hosts.allows(authority: allowed), "\(allowed)")
        }
        // A rebinding name at the right port, the right names at another port, a name alone (port 80), none.
        for refused in [
            "attacker.example:9466", "localhost:80", "127.0.0.1:9467", "localhost", "127.0.0.2:9466",
            "localhost.attacker.example:9466", "localhost@attacker.example:9466", "", "[::1", "localhost:x",
        ] {
            #expect(!hosts.allows(authority: refused), "\(refused)")
        }
        #expect(!hosts.allows(authority: nil), "a request without a host")
    }

    @Test("A4: a bound address joins the default; 0.0.0.0 and :: name no host")
    func boundAddress() {
        #expect(AllowedHosts.loopback(port: 80, boundHost: "10.1.2.3").allows(authority: "10.1.2.3"))
        #expect(!AllowedHosts.loopback(port: 80, boundHost: "0.0.0.0").allows(authority: "0.0.0.0"))
        #expect(AllowedHosts.loopback(port: 80, boundHost: "::").entries.count == 3)
        // Port 0 (a free port picked at start): the loopback names at any port.
        #expect(AllowedHosts.loopback(port: 0).allows(authority: "localhost:41234"))
    }

    @Test("A4: http.allowedHosts entries: a name at any port, name:port, a bracketed IPv6 address, *")
    func configured() throws {
        let hosts = try AllowedHosts(parsing: ["rides.example.com", " worker:9466", "[::1]:9466", ""])
        #expect(hosts.allows(authority: "rides.example.com"))
        #expect(hosts.allows(authority: "Rides.Example.com:443"))
        #expect(hosts.allows(authority: "worker:9466"))
        #expect(!hosts.allows(authority: "worker:9467"))
        #expect(hosts.allows(authority: "[::1]:9466"))
        #expect(!hosts.allows(authority: "localhost:9466"), "a list replaces the default")
        #expect(try AllowedHosts(parsing: ["*"]).allows(authority: nil), "* turns the check off")
        for bad in ["a/b", "host:port", "user@host", "[::1]x"] {
            #expect(throws: AllowedHosts.Problem.self, "\(bad)") { try AllowedHosts(parsing: [bad]) }
        }
    }

    @Test(
        "A4: the built worker answers a rebinding name with 421 on the map, /v1, the live feed, share pages and /metrics; the probes answer any host"
    )
    func workerRefusesOtherHosts() async throws {
        try await withTestBroker { broker in
            let worker = try WorkerProcess(broker: broker)
            try await worker.start()
            let port = worker.metricsPort
            let attacker = "attacker.example:\(port)"
            for path in ["/", "/v1/vehicles", "/v1/rides", "/v1/live", "/share/x.y.z", "/metrics", "/nothing-here"] {
                let answer = httpRequest(port: port, path: path, headers: ["Host": attacker], seconds: 2)
                #expect(answer?.status == 421, "\(path) for \(attacker): \(String(describing: answer?.status))")
                #expect(answer?.body.contains("misdirectedHost") == true, "\(path): \(answer?.body ?? "")")
            }
            for path in ["/healthz", "/readyz"] {
                #expect(httpGet(port: port, path: path, hostHeader: attacker)?.status == 200, "\(path)")
            }
            // The same paths for the worker's own name answer as before.
            #expect(httpGet(port: port, path: "/v1/vehicles")?.status == 200)
            #expect(httpGet(port: port, path: "/v1/vehicles", hostHeader: "127.0.0.1:\(port)")?.status == 200)
            #expect(await worker.terminate().code == 0)

            // http.allowedHosts replaces the default: the configured name passes, localhost no longer does.
            let proxied = try WorkerProcess(broker: broker, extra: ["--set", "http.allowedHosts=rides.example.com"])
            try await proxied.start()
            #expect(
                httpGet(port: proxied.metricsPort, path: "/v1/vehicles", hostHeader: "rides.example.com")?.status == 200
            )
            #expect(httpGet(port: proxied.metricsPort, path: "/v1/vehicles")?.status == 421)
            #expect(await proxied.terminate().code == 0)
        }
    }
}
