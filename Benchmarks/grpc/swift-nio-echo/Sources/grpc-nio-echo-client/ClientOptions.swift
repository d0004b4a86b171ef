/// The load client's command line:
///
///     --target HOST:PORT        the server (required)
///     --method unary|stream     which echo method (unary)
///     --concurrency N           calls (unary) or streams (stream) in flight at once (1)
///     --duration S              seconds measured (2)
///     --warmup S                seconds of the same load first, not measured (0.3)
///     --message-size B          bytes per message (64)
///     --event-loops N           NIO event loop threads of the client (1)
struct ClientOptions {
    enum Method: String {
        case unary
        case stream
    }

    var host = ""
    var port = 0
    var method = Method.unary
    var concurrency = 1
    var duration = 2.0
    var warmup = 0.3
    var messageSize = 64
    var eventLoops = 1

    /// Parses `arguments` (without the program's name); a bad, unknown or missing
    /// argument is reported as a `UsageError`.
    init(parsing arguments: [String]) throws(UsageError) {
        var rest = arguments[...]
        var sawTarget = false
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { throw UsageError("\(flag) needs a value") }
            switch flag {
            case "--target":
                guard let colon = value.lastIndex(of: ":"), let port = Int(value[value.index(after: colon)...]),
                    (1...65535).contains(port)
                else { throw UsageError("bad target \(value) (HOST:PORT)") }
                self.host = String(value[..<colon])
                self.port = port
                sawTarget = true
            case "--method":
                guard let method = Method(rawValue: value) else { throw UsageError("bad method \(value) (unary or stream)") }
                self.method = method
            case "--concurrency":
                self.concurrency = try Self.positive(value, flag)
            case "--duration":
                guard let seconds = Double(value), seconds > 0 else { throw UsageError("bad duration \(value)") }
                self.duration = seconds
            case "--warmup":
                guard let seconds = Double(value), seconds >= 0 else { throw UsageError("bad warmup \(value)") }
                self.warmup = seconds
            case "--message-size":
                guard let size = Int(value), size >= 0 else { throw UsageError("bad message size \(value)") }
                self.messageSize = size
            case "--event-loops":
                self.eventLoops = try Self.positive(value, flag)
            default:
                throw UsageError("unknown argument \(flag)")
            }
        }
        guard sawTarget else { throw UsageError("--target HOST:PORT is required") }
    }

    private static func positive(_ value: String, _ flag: String) throws(UsageError) -> Int {
        guard let number = Int(value), number > 0 else { throw UsageError("bad \(flag) \(value)") }
        return number
    }
}

/// A command line the program cannot run with; its message says what was wrong.
struct UsageError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
