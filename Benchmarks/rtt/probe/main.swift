// rtt-probe: the two ends of Benchmarks/rtt, which times calls on a `CallChannel` over a link
// with a 20 ms round trip (Benchmarks/rtt/run builds the link and runs both ends in it).
//
//     rtt-probe serve --backend bsd|libuv --host ADDRESS --port PORT [--tls-cert PEM --tls-key KEY]
//     rtt-probe calls --backend bsd|libuv --host ADDRESS --port PORT [--calls 20]
//                     [--tls-ca PEM --server-name NAME]
//
// `serve` is a `CallServer` answering the unary method `/switchyard.bench.Echo/Unary` (the
// method Benchmarks/grpc's servers serve): it keeps the request's message and, at the
// client's end, sends it back and ends the call OK, so the answer leaves as HEADERS, DATA
// and trailers together. With `--tls-cert` it speaks TLS (SwitchyardTLS, ALPN `h2`).
// Prints `listening on PORT` once bound; serves until SIGTERM or SIGINT.
//
// `calls` makes one `CallChannel` (nothing connects until the first call) and makes
// `--calls` unary calls on it one after another, each a 64-byte message written, the
// client's side ended, the answer and the status awaited. It times each call from just
// before `withCall` to the status, so the first call's time includes the TCP connect, the
// TLS handshake with `--tls-ca`, and HTTP/2's preface and SETTINGS. Prints one line of
// JSON: `{"first_ms": F, "rest_ms": [..]}` (milliseconds, `ContinuousClock`).

import Glibc
import Switchyard
import SwitchyardBackends
import SwitchyardCalls
import SwitchyardTLS

let unaryPath = "/switchyard.bench.Echo/Unary"

func fail(_ message: String) -> Never {
    let line = Array("rtt-probe: \(message)\n".utf8)
    _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(2)
}

struct Settings {
    var mode = ""
    var backend = "bsd"
    var host = "127.0.0.1"
    var port = 0
    var calls = 20
    var tlsCert: String?
    var tlsKey: String?
    var tlsCA: String?
    var serverName = "localhost"
}

func parse(_ arguments: [String]) -> Settings {
    var settings = Settings()
    var rest = arguments[...]
    guard let mode = rest.popFirst(), mode == "serve" || mode == "calls" else {
        fail("usage: rtt-probe serve|calls [options] (see the header of Benchmarks/rtt/probe/main.swift)")
    }
    settings.mode = mode
    func value(_ flag: String) -> String {
        guard let value = rest.popFirst() else { fail("\(flag) needs a value") }
        return value
    }
    while let flag = rest.popFirst() {
        switch flag {
        case "--backend": settings.backend = value(flag)
        case "--host": settings.host = value(flag)
        case "--port":
            guard let port = Int(value(flag)), (0...65535).contains(port) else { fail("--port needs a number in 0...65535") }
            settings.port = port
        case "--calls":
            guard let calls = Int(value(flag)), calls >= 1 else { fail("--calls needs a number >= 1") }
            settings.calls = calls
        case "--tls-cert": settings.tlsCert = value(flag)
        case "--tls-key": settings.tlsKey = value(flag)
        case "--tls-ca": settings.tlsCA = value(flag)
        case "--server-name": settings.serverName = value(flag)
        default: fail("unknown argument '\(flag)'")
        }
    }
    guard Backends.registry.names.contains(settings.backend) else {
        fail("--backend: no backend '\(settings.backend)' (registered: \(Backends.registry.names.joined(separator: ", ")))")
    }
    return settings
}

func serve(_ settings: Settings) async {
    let base: any Transport
    do {
        base = try Backends.makeTransport(named: settings.backend, configuration: TransportConfiguration(eventLoopCount: 1))
    } catch {
        fail("\(settings.backend): \(error)")
    }
    var transport = base
    if let cert = settings.tlsCert {
        guard let key = settings.tlsKey else { fail("--tls-cert needs --tls-key") }
        do {
            transport = try TLSTransport(
                wrapping: base, server: .server(certificateChainFile: cert, privateKeyFile: key, applicationProtocols: ["h2"]))
        } catch {
            fail("TLS: \(error)")
        }
    }
    let server: CallServer
    do {
        server = try await CallServer.start(transport: transport, on: Endpoint(host: settings.host, port: settings.port)) { call in
            guard call.method == unaryPath else {
                return CallStatus(error: TransportError(code: .unimplemented, reason: .init("unimplemented"), message: "no method \(call.method)"))
            }
            var messages: [[UInt8]] = []
            for try await message in call.messages { messages.append(message) }
            guard messages.count == 1 else {
                return CallStatus(error: TransportError(code: .internal, reason: .protocolViolation, message: "a unary call sent \(messages.count) messages"))
            }
            try await call.write(messages[0])
            return .ok
        }
    } catch {
        fail("listen on \(settings.host):\(settings.port): \(error)")
    }
    print("listening on \(server.localAddress.port) (backend \(transport.name))")
    fflush(nil)
    await server.serve()
    withExtendedLifetime(transport) {}
}

/// `value` with three decimals (no Foundation here).
func milliseconds(_ value: Double) -> String {
    let micro = Int((value * 1000).rounded())
    let fraction = String(micro % 1000)
    return "\(micro / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
}

func calls(_ settings: Settings) async {
    let base: any Transport
    do {
        base = try Backends.makeTransport(named: settings.backend, configuration: TransportConfiguration(eventLoopCount: 1))
    } catch {
        fail("\(settings.backend): \(error)")
    }
    var transport = base
    if let ca = settings.tlsCA {
        do {
            transport = try TLSTransport(
                wrapping: base,
                client: .client(trustRoots: .pemFile(ca), serverName: settings.serverName, applicationProtocols: ["h2"]))
        } catch {
            fail("TLS: \(error)")
        }
    }
    let channel = CallChannel(target: Endpoint(host: settings.host, port: settings.port), transport: transport)
    let message = [UInt8](repeating: 0x5a, count: 64)
    let clock = ContinuousClock()
    var times: [Double] = []
    for index in 0..<settings.calls {
        let start = clock.now
        do {
            let (answer, status) = try await channel.withCall(method: unaryPath) { call in
                try await call.write(message)
                try await call.finishSending()
                let answer = try await call.next()
                return (answer, await call.status())
            }
            guard answer == message, status == .ok else { fail("call \(index + 1): answer \(answer?.count ?? -1) bytes, status \(status)") }
        } catch {
            fail("call \(index + 1): \(error)")
        }
        let elapsed = clock.now - start
        times.append(Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15)
    }
    channel.close()
    let rest = times.dropFirst().map { milliseconds($0) }.joined(separator: ", ")
    print("{\"transport\": \"\(transport.name)\", \"first_ms\": \(milliseconds(times[0])), \"rest_ms\": [\(rest)]}")
    fflush(nil)
    await transport.shutdownNow()
}

let settings = parse(Array(CommandLine.arguments.dropFirst()))
if settings.mode == "serve" {
    await serve(settings)
} else {
    await calls(settings)
}
