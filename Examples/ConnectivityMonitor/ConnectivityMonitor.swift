// connectivity-monitor: prints the network path and every change to it.
//
//     connectivity-monitor [--debounce-ms MS] [--count N] [--duration SECONDS]
//
// The first line is the path now; every later line is one change, with a UTC timestamp,
// and the addresses of the default route's interface in brackets (a change of them alone,
// such as a new address from DHCP, is a line too):
//
//     connectivity-monitor: current wifi (wlan0) [192.168.1.20]
//     2025-06-01T12:00:03.512Z wifi (wlan1) [10.0.0.7]
//     2025-06-01T12:00:05.730Z cellular (wwan0) [100.64.3.9]
//     2025-06-01T12:00:09.001Z none
//
// It watches the network namespace it runs in (`ip netns exec NS connectivity-monitor`
// watches NS), and runs until SIGINT or SIGTERM, `--count` changes, or `--duration`
// seconds, whichever comes first; then it prints 'connectivity-monitor: stopped (REASON)'
// and exits 0. It runs as a swift-service-lifecycle `ServiceGroup` (the monitor and the
// reachability checker are its services); a second signal while it stops exits at once
// (128 plus the signal's number).
//
// With `--reachability-url http://host[:port]/path [--reachability-timeout SECONDS]
// [--backend NAME]` (or an `https://` URL, probed over TLS: SwitchyardTLS's TLSTransport
// over the backend, verifying the certificate for the URL's host against the system's
// trust store or `--reachability-ca PEM`) it also follows the site's reachability (SiteReachability: an
// HTTP/1.1 HEAD over a Switchyard transport at start, on each change and while
// unreachable), one line per state with a UTC timestamp; the word after
// 'reachability:' is none, checking, reachable, unreachable or portal:
//
//     2025-06-01T12:00:03.514Z reachability: checking
//     2025-06-01T12:00:03.530Z reachability: reachable (15.902 ms)
//     2025-06-01T12:00:09.004Z reachability: unreachable (refused): connection refused ...
//     2025-06-01T12:00:11.120Z reachability: portal (302, location http://login.example/)

import ArgumentParser
import Glibc
import Logging
import ServiceLifecycle
import Switchyard
import SwitchyardReachability
import SwitchyardBackends
import SwitchyardNetlink
import SwitchyardServiceLifecycle
#if TLS
import SwitchyardTLS
#endif
import Synchronization
import ToolSupport

@main
struct ConnectivityMonitorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connectivity-monitor",
        abstract: "Prints the network path (category and interface) and each change to it.",
        discussion: """
            Follows rtnetlink in the current network namespace. The category is that of \
            the interface carrying the default route: wifi, cellular, wired, other, or none.
            """)

    @Option(name: .customLong("debounce-ms"), parsing: .unconditional, help: "Milliseconds the tables must be quiet before a burst counts as one change.")
    var debounceMilliseconds = 50

    @Option(parsing: .unconditional, help: "Stop after this many changes.")
    var count: Int?

    @Option(parsing: .unconditional, help: "Stop after this many seconds.")
    var duration: Double?

    @Option(name: .customLong("reachability-url"), help: "Also follow this site's reachability: an HTTP/1.1 HEAD to http://host[:port]/path or https://host[:port]/path (over TLS, the certificate verified for the host), printed as 'reachability: STATE' lines.")
    var reachabilityURL: String?

    @Option(name: .customLong("reachability-timeout"), parsing: .unconditional, help: "Seconds one reachability probe may take (connect, request and answer).")
    var reachabilityTimeout: Double = 5

    @Option(help: "The backend the reachability probe connects with (default: $\(BackendRegistry.environmentVariable), else '\(Backends.defaultName)'). Registered: \(Backends.registry.names.joined(separator: ", ")).")
    var backend: String?

    @Option(name: .customLong("reachability-ca"), help: ArgumentHelp("With an https --reachability-url: trust only the CA certificates in this PEM file (default: the system's trust store).", valueName: "pem"))
    var reachabilityCA: String?

    func validate() throws {
        if let reachabilityCA {
            guard let reachabilityURL, (try? ReachabilityURL(parsing: reachabilityURL))?.isSecure != false else {
                throw ValidationError("--reachability-ca needs an https --reachability-url")
            }
            if access(reachabilityCA, R_OK) != 0 {
                throw ValidationError("--reachability-ca \(reachabilityCA): cannot read it (\(String(cString: strerror(errno))))")
            }
            #if TLS
            do {
                _ = try TLSContext(configuration: .client(trustRoots: .pemFile(reachabilityCA)))
            } catch {
                throw ValidationError("--reachability-ca: \(error.message)")
            }
            #else
            throw ValidationError(ToolValidation.withoutTLS("--reachability-ca"))
            #endif
        }
        guard (0...60_000).contains(debounceMilliseconds) else {
            throw ValidationError("--debounce-ms \(debounceMilliseconds) is out of range: use 0...60000")
        }
        if let count, count < 1 {
            throw ValidationError("--count \(count) is out of range: use 1 or more")
        }
        if let duration, !(duration > 0 && duration <= 31_536_000) {
            throw ValidationError("--duration \(duration) is out of range: use more than 0 seconds, at most a year")
        }
        if !(reachabilityTimeout > 0 && reachabilityTimeout <= 3600) {
            throw ValidationError("--reachability-timeout \(reachabilityTimeout) is out of range: use more than 0 seconds, at most 3600")
        }
        if let reachabilityURL {
            do {
                _ = try ReachabilityURL(parsing: reachabilityURL)
            } catch {
                throw ValidationError("--reachability-url: \(error.message)")
            }
        }
        // The backend is used by the probe only, but a --backend given is checked either
        // way: a misspelt name is an error, not silently ignored.
        if reachabilityURL != nil || backend != nil {
            do {
                _ = try Backends.registry.backend(named: Backends.selectedName(explicit: backend))
            } catch {
                throw ValidationError("\(Backends.selectionSource(explicit: backend)): \(error.message)")
            }
        }
    }

    func run() async throws {
        let monitor: NetlinkConnectivityMonitor
        do {
            monitor = try NetlinkConnectivityMonitor(debounce: .milliseconds(debounceMilliseconds))
        } catch {
            fail("cannot monitor the network: \(error)")
        }
        defer { monitor.close() }

        // Observe first, then read the current path, so no change falls in between. The
        // path is printed once the signals are handled (below), and the printers start
        // only after that line.
        let changes = monitor.changes
        let initial = monitor.current
        let (ready, readyNow) = AsyncStream<Void>.makeStream()

        // Reachability, if asked for: its own transport and checker, following this monitor.
        var reachability: SiteReachability?
        var transport: (any Transport)?
        if let reachabilityURL {
            let name = Backends.selectedName(explicit: backend)
            do {
                var made = try Backends.makeTransport(named: name, configuration: TransportConfiguration(eventLoopCount: 1))
                transport = made
                if try ReachabilityURL(parsing: reachabilityURL).isSecure {
                    #if TLS
                    // https: TLS over the backend; the name verified is the URL's host.
                    made = try TLSTransport(
                        wrapping: made, client: .client(trustRoots: reachabilityCA.map { .pemFile($0) } ?? .system))
                    transport = made
                    #else
                    await made.shutdownNow()
                    fail(ToolValidation.withoutTLS("an https:// URL"))
                    #endif
                }
                reachability = try SiteReachability(
                    configuration: SiteReachabilityConfiguration(
                        url: reachabilityURL, timeout: .milliseconds(Int64(reachabilityTimeout * 1000))),
                    monitor: monitor, transport: made)
            } catch {
                fail("cannot follow reachability with backend '\(name)': \(error)")
            }
        }

        // A ServiceGroup, started in this order and shut down in the reverse: the monitor
        // (closed last), the reachability checker and its printer, the change printer, the
        // timer. Whatever comes first ends the run gracefully: SIGINT or SIGTERM (the
        // group's signal handling), --count changes, or --duration.
        let reason = FirstReason()
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: monitor)]
        if let reachability {
            let states = reachability.updates
            services.append(.init(service: reachability))
            services.append(.init(service: ClosureService {
                for await _ in ready {}
                // Ends at the shutdown (the checker's sequence ends only when it stops, after this).
                for await state in states.cancelOnGracefulShutdown() {
                    var line = "\(timestamp()) reachability: \(state)"
                    if case .unreachable(let failure) = state { line += ": \(failure.message)" }
                    print(line)
                    fflush(nil)
                }
            }))
        }
        let limit = count
        services.append(.init(
            service: ClosureService {
                for await _ in ready {}
                var last = initial
                var seen = 0
                for await path in changes.cancelOnGracefulShutdown() where path != last {
                    last = path
                    seen += 1
                    print("\(timestamp()) \(shown(path))")
                    fflush(nil)
                    if let limit, seen >= limit {
                        reason.set("\(seen) change\(seen == 1 ? "" : "s")")
                        return
                    }
                }
            },
            successTerminationBehavior: .gracefullyShutdownGroup))
        if let seconds = duration {
            services.append(.init(
                service: ClosureService {
                    guard (try? await cancelWhenGracefulShutdown({ try await Task.sleep(for: .milliseconds(Int64(seconds * 1000))) })) != nil else { return }
                    reason.set("\(seconds) s")
                },
                successTerminationBehavior: .gracefullyShutdownGroup))
        }
        let signals = ShutdownSignals(
            onReady: {
                // Only now: a signal sent after this line is always handled.
                print("connectivity-monitor: current \(shown(initial))")
                fflush(nil)
                readyNow.finish()
            },
            onSignal: { signal, _ in reason.set(ShutdownSignals.name(of: signal)) })
        let group = ServiceGroup(configuration: signals.configuration(running: services, logger: Logger(label: "connectivity-monitor")))
        let status: Int32
        do {
            status = try await ToolRun.exitStatus(running: group)
        } catch {
            fail("\(error)")
        }
        await transport?.shutdownNow()
        print("connectivity-monitor: stopped (\(reason.value ?? "done"))")
        fflush(nil)
        if status != 0 { Glibc.exit(status) }
    }
}

/// Why the run ended: the first reason given wins.
private final class FirstReason: Sendable {
    private let reason = Mutex<String?>(nil)
    func set(_ why: String) { reason.withLock { $0 = $0 ?? why } }
    var value: String? { reason.withLock { $0 } }
}

/// A path as a line shows it: `wifi (wlan0) [192.168.1.20, 2001:db8::20]`.
private func shown(_ path: ConnectivityPath) -> String {
    path.addresses.isEmpty ? "\(path)" : "\(path) [\(path.addresses.sorted().joined(separator: ", "))]"
}

/// Now in UTC, ISO 8601 with milliseconds: `2025-06-01T12:00:03.512Z`.
private func timestamp() -> String {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    var seconds = now.tv_sec
    var parts = tm()
    gmtime_r(&seconds, &parts)
    func pad(_ value: Int32, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
        + "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))"
        + ".\(pad(Int32(now.tv_nsec / 1_000_000), 3))Z"
}

/// Prints to standard error and exits 1.
private func fail(_ message: String) -> Never {
    let line = "connectivity-monitor: error: \(message)\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
    exit(1)
}
