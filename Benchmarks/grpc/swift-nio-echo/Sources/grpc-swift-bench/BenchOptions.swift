/// The command line of `grpc-swift-bench`, one program for both sides:
///
///     grpc-swift-bench serve --transport nio|switchyard [--backend bsd|libuv]
///                            [--host 127.0.0.1] [--port 0]
///     grpc-swift-bench load  --transport nio|switchyard [--backend bsd|libuv]
///                            --target HOST:PORT [--method unary|stream] [--concurrency 1]
///                            [--duration 2] [--warmup 0.3] [--message-size 64]
///
/// `--transport` picks the GRPCCore transport under the one service (`serve`) or the one
/// load driver (`load`): `nio` is grpc-swift-nio-transport's `HTTP2ServerTransport.Posix` /
/// `HTTP2ClientTransport.Posix`, `switchyard` is SwitchyardGRPC's transport on the
/// Switchyard backend `--backend` (bsd by default; ignored with `nio`). Each side runs
/// one event loop thread.
struct BenchOptions {
    enum Role: String {
        case serve
        case load
    }

    enum TransportKind: String {
        case nio
        case switchyard
    }

    enum Method: String {
        case unary
        case stream
    }

    var role: Role
    var transport = TransportKind.nio
    var backend = "bsd"
    var host = "127.0.0.1"
    var port = 0
    var method = Method.unary
    var concurrency = 1
    var duration = 2.0
    var warmup = 0.3
    var messageSize = 64

    /// Parses `arguments` (without the program's name); a bad, unknown or missing
    /// argument is reported as a `UsageError`.
    init(parsing arguments: [String]) throws(UsageError) {
        var rest = arguments[...]
        guard let first = rest.popFirst(), let role = Role(rawValue: first) else {
            throw UsageError("the first argument must be serve or load")
        }
        self.role = role
        var sawTarget = false
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { throw UsageError("\(flag) needs a value") }
            switch flag {
            case "--transport":
                guard let kind = TransportKind(rawValue: value) else { throw UsageError("bad transport \(value) (nio or switchyard)") }
                self.transport = kind
            case "--backend":
                guard value == "bsd" || value == "libuv" else { throw UsageError("bad backend \(value) (bsd or libuv)") }
                self.backend = value
            case "--host" where role == .serve:
                self.host = value
            case "--port" where role == .serve:
                guard let port = Int(value), (0...65535).contains(port) else { throw UsageError("bad port \(value)") }
                self.port = port
            case "--target" where role == .load:
                guard let colon = value.lastIndex(of: ":"), let port = Int(value[value.index(after: colon)...]),
                    (1...65535).contains(port)
                else { throw UsageError("bad target \(value) (HOST:PORT)") }
                self.host = String(value[..<colon])
                self.port = port
                sawTarget = true
            case "--method" where role == .load:
                guard let method = Method(rawValue: value) else { throw UsageError("bad method \(value) (unary or stream)") }
                self.method = method
            case "--concurrency" where role == .load:
                guard let number = Int(value), number > 0 else { throw UsageError("bad concurrency \(value)") }
                self.concurrency = number
            case "--duration" where role == .load:
                guard let seconds = Double(value), seconds > 0 else { throw UsageError("bad duration \(value)") }
                self.duration = seconds
            case "--warmup" where role == .load:
                guard let seconds = Double(value), seconds >= 0 else { throw UsageError("bad warmup \(value)") }
                self.warmup = seconds
            case "--message-size" where role == .load:
                guard let size = Int(value), size >= 0 else { throw UsageError("bad message size \(value)") }
                self.messageSize = size
            default:
                throw UsageError("unknown argument \(flag) for \(role.rawValue)")
            }
        }
        if role == .load && !sawTarget { throw UsageError("load needs --target HOST:PORT") }
    }
}

/// A command line the program cannot run with; its message says what was wrong.
struct UsageError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
