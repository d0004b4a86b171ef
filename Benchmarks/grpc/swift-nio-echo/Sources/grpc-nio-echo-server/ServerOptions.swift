/// The server's command line: `--host H` (127.0.0.1), `--port P` (0 picks one),
/// `--event-loops N` (1: one NIO event loop thread, as every server of Benchmarks/run),
/// `--executor default|nio`: where the RPC handlers run, Swift's global executor (its
/// default thread pool, grpc-swift out of the box) or, with `nio`, the NIO event loops
/// installed as that global executor, so a call does not hop between threads.
struct ServerOptions {
    enum Executor: String {
        case `default`
        case nio
    }

    var host = "127.0.0.1"
    var port = 0
    var eventLoops = 1
    var executor = Executor.default

    /// Parses `arguments` (without the program's name); a bad or unknown argument is
    /// reported as a `UsageError`.
    init(parsing arguments: [String]) throws(UsageError) {
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { throw UsageError("\(flag) needs a value") }
            switch flag {
            case "--host":
                self.host = value
            case "--port":
                guard let port = Int(value), (0...65535).contains(port) else { throw UsageError("bad port \(value)") }
                self.port = port
            case "--event-loops":
                guard let loops = Int(value), loops > 0 else { throw UsageError("bad event loop count \(value)") }
                self.eventLoops = loops
            case "--executor":
                guard let executor = Executor(rawValue: value) else { throw UsageError("bad executor \(value) (default or nio)") }
                self.executor = executor
            default:
                throw UsageError("unknown argument \(flag)")
            }
        }
    }
}

/// A command line the program cannot run with; its message says what was wrong.
struct UsageError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
