// switchyard-grpc-echo: Switchyard's gRPC echo server for Benchmarks/grpc (the `switchyard`
// row of its table): a `CallServer` with the handler face (`CallHandler`), plaintext HTTP/2
// on one event loop thread.
//
//     switchyard-grpc-echo [--backend bsd|libuv] [--host 127.0.0.1] [--port 0] [--event-loops 1]
//
// Serves the two methods every server of Benchmarks/grpc serves, with raw bytes as
// messages (whatever a client sends comes back unchanged):
//
// - `/switchyard.bench.Echo/Unary`: one message in, the same message back, status OK once
//   the client's side ended. No message, or a second one, ends the call with `internal`
//   (grpc-status 13), as a gRPC server ends a unary call that breaks its cardinality;
// - `/switchyard.bench.Echo/Stream`: each message echoed as it arrives, status OK once the
//   client's side ended;
// - any other method ends with `unimplemented` (grpc-status 12).
//
// Flow control is off (the default `CallConfiguration`): messages are delivered as they
// arrive, and the HTTP/2 stream windows do the pushing back. Per message the handler only
// sends the array the call handed it (no copy of its own); the stream handler is one
// object for every call, the unary one one per call (it holds the message until the
// client's end).
//
// Prints `listening on PORT` once bound (the convention of Benchmarks/run's servers) and
// serves until SIGTERM or SIGINT ends the process.

import Glibc
import Switchyard
import SwitchyardBackends
import SwitchyardCalls

let unaryPath = "/switchyard.bench.Echo/Unary"
let streamPath = "/switchyard.bench.Echo/Stream"

/// Echoes every message of a call and ends it OK at the client's end. Holds no state, so
/// one instance serves every stream call.
final class StreamEcho: CallHandler {
    func call(_ call: Call, didReceive message: [UInt8]) { call.send(message) }
    func callDidReceiveEnd(_ call: Call) { call.finish(.ok) }
    func call(_ call: Call, didCloseWith status: CallStatus) {}
}

/// One unary call: keeps its one message, and at the client's end sends it back with
/// status OK (the answer goes out as HEADERS, DATA and trailers together).
///
/// `@unchecked Sendable`: a call's handler is called only on the call's loop, one event at
/// a time, so `message` and `ended` are never touched from two threads.
final class UnaryEcho: CallHandler, @unchecked Sendable {
    private var message: [UInt8]?
    private var ended = false

    func call(_ call: Call, didReceive message: [UInt8]) {
        guard !ended else { return }
        guard self.message == nil else {
            fail(call, "a unary call sent a second message")
            return
        }
        self.message = message
    }

    func callDidReceiveEnd(_ call: Call) {
        guard !ended else { return }
        guard let message else {
            fail(call, "a unary call ended without a message")
            return
        }
        ended = true
        self.message = nil
        call.send(message)
        call.finish(.ok)
    }

    func call(_ call: Call, didCloseWith status: CallStatus) {}

    private func fail(_ call: Call, _ why: String) {
        ended = true
        message = nil
        call.finish(CallStatus(error: TransportError(code: .internal, reason: .protocolViolation, message: why)))
    }
}

/// A method this server does not serve: ends the call with `unimplemented` at once.
final class Unimplemented: CallHandler {
    func call(_ call: Call, didReceive message: [UInt8]) {}
    func call(_ call: Call, didCloseWith status: CallStatus) {}
}

struct Settings {
    var backend = "bsd"
    var host = "127.0.0.1"
    var port = 0
    var eventLoops = 1
}

func fail(_ message: String) -> Never {
    let line = Array("switchyard-grpc-echo: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(2)
}

func parse(_ arguments: [String]) -> Settings {
    var settings = Settings()
    var rest = arguments[...]
    func value(_ flag: String) -> String {
        guard let value = rest.popFirst() else { fail("\(flag) needs a value") }
        return value
    }
    while let flag = rest.popFirst() {
        switch flag {
        case "--backend":
            settings.backend = value(flag)
            guard Backends.registry.names.contains(settings.backend) else {
                fail("--backend: no backend '\(settings.backend)' (registered: \(Backends.registry.names.joined(separator: ", ")))")
            }
        case "--host":
            settings.host = value(flag)
        case "--port":
            guard let port = Int(value(flag)), (0...65535).contains(port) else { fail("--port needs a number in 0...65535") }
            settings.port = port
        case "--event-loops":
            guard let count = Int(value(flag)), count >= 1 else { fail("--event-loops needs a number >= 1") }
            settings.eventLoops = count
        case "-h", "--help":
            print("usage: switchyard-grpc-echo [--backend bsd|libuv] [--host 127.0.0.1] [--port 0] [--event-loops 1]")
            exit(0)
        default:
            fail("unknown argument '\(flag)' (try --help)")
        }
    }
    return settings
}

let settings = parse(Array(CommandLine.arguments.dropFirst()))
let transport: any Transport
do {
    transport = try Backends.makeTransport(named: settings.backend, configuration: TransportConfiguration(eventLoopCount: settings.eventLoops))
} catch {
    fail("\(settings.backend): \(error)")
}
let streamEcho = StreamEcho()
let unimplemented = Unimplemented()
let server: CallServer
do {
    server = try await CallServer.start(transport: transport, on: Endpoint(host: settings.host, port: settings.port)) { call in
        switch call.method {
        case unaryPath:
            return UnaryEcho()
        case streamPath:
            return streamEcho
        default:
            let method = call.method
            // Not inside the making of the handler: the call takes it once this returns.
            call.eventLoop.execute {
                call.finish(CallStatus(error: TransportError(code: .unimplemented, reason: .init("unimplemented"), message: "no method \(method)")))
            }
            return unimplemented
        }
    }
} catch {
    fail("listen on \(settings.host):\(settings.port): \(error)")
}
print("listening on \(server.localAddress.port) (backend \(settings.backend))")
fflush(nil)
// Serves until a signal ends the process; the transport lives as long as its listener.
await server.serve()
withExtendedLifetime(transport) {}
