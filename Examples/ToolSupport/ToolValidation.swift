import ArgumentParser
import Switchyard

/// The checks of the options that several tools share (`--port`, `--host`, `--path`,
/// `--event-loops`, `--grace-period`): one rule and one message each, whichever tool
/// says it.
public enum ToolValidation {
    /// `--port`: 1...65535 for a tool that connects; 0...65535 for one that listens, where
    /// 0 picks a free port.
    public static func check(port: Int, listening: Bool) throws {
        if listening {
            guard (0...65535).contains(port) else {
                throw ValidationError("--port \(port) is out of range: use 0...65535 (0 picks a free port)")
            }
        } else {
            guard (1...65535).contains(port) else {
                throw ValidationError("--port \(port) is out of range: use 1...65535")
            }
        }
    }

    /// `--host`: what ``Endpoint/validate(host:)`` accepts.
    public static func check(host: String) throws {
        do {
            try Endpoint.validate(host: host)
        } catch {
            throw ValidationError("--host: \(error.message)")
        }
    }

    /// `--path`, when given: what ``Endpoint/validate(path:)`` accepts.
    public static func check(path: String?) throws {
        guard let path else { return }
        do {
            try Endpoint.validate(path: path)
        } catch {
            throw ValidationError("--path: \(error.message)")
        }
    }

    /// `--event-loops`, when given: 1...1024 threads.
    public static func check(eventLoops: Int?) throws {
        if let eventLoops, !(1...1024).contains(eventLoops) {
            throw ValidationError("--event-loops \(eventLoops) is out of range: use 1...1024")
        }
    }

    /// `--grace-period`: 0...3600 seconds.
    public static func check(gracePeriod: Double) throws {
        guard gracePeriod >= 0, gracePeriod <= 3600 else {
            throw ValidationError("--grace-period \(gracePeriod) is out of range: use 0...3600 seconds")
        }
    }

    /// What a TLS option says in a tool built with Switchyard's package trait TLS off
    /// (no OpenSSL linked): the option, and how to get a build that has it.
    public static func withoutTLS(_ option: String) -> String {
        "\(option): this build has no TLS (Switchyard's package trait TLS is off); build with the default traits"
    }
}
