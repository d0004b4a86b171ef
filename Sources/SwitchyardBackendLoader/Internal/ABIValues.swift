import CSwitchyardBackendABI
import Switchyard
import SwitchyardBackendKit

// The values that cross the C boundary of a loaded backend (switchyard_backend.h), each
// mapped both ways in one place. Both sides of the boundary run this code: the library
// its own copy, the host its own.

/// The sizes each side writes into the `size` field of a struct it passes.
enum ABISize {
    static let error = UInt32(MemoryLayout<sy_error>.size)
    static let endpoint = UInt32(MemoryLayout<sy_endpoint>.size)
    static let configuration = UInt32(MemoryLayout<sy_configuration>.size)
    static let connectOptions = UInt32(MemoryLayout<sy_connect_options>.size)
    static let listenOptions = UInt32(MemoryLayout<sy_listen_options>.size)
    static let handlerCallbacks = UInt32(MemoryLayout<sy_handler_callbacks>.size)
    static let acceptCallbacks = UInt32(MemoryLayout<sy_accept_callbacks>.size)
    static let backend = UInt32(MemoryLayout<sy_backend>.size)

    /// The configuration's fields of the first version: those before the first field
    /// added later (`kernel_stall_detection`).
    static let firstConfiguration = UInt32(MemoryLayout<sy_configuration>.offset(of: \.kernel_stall_detection)!)

    /// The size a configuration must have for `field` to be in it.
    static func configurationCovering<Field>(_ field: KeyPath<sy_configuration, Field>) -> UInt32 {
        UInt32(MemoryLayout<sy_configuration>.offset(of: field)! + MemoryLayout<Field>.size)
    }
}

extension TransportError.Reason {
    /// What a library reports for an error its backend threw that is no ``TransportError``
    /// (the contract allows none).
    static let notATransportError = TransportError.Reason("not a transport error")
}

// MARK: - Errors

extension TransportError {
    /// Runs `body` with this error as a `sy_error`, borrowed for the call.
    func withABI<R>(_ body: (UnsafePointer<sy_error>) -> R) -> R {
        reason.name.withCString { reason in
            message.withCString { message in
                var error = sy_error(
                    size: ABISize.error, code: Int32(code.wireValue), reason: reason, message: message,
                    native_domain: nil, native_code: 0, native_name: nil)
                guard let native else { return withUnsafePointer(to: &error, body) }
                return native.domain.name.withCString { domain in
                    native.name.withCString { name in
                        error.native_domain = domain
                        error.native_code = native.code
                        error.native_name = name
                        return withUnsafePointer(to: &error, body)
                    }
                }
            }
        }
    }

    /// Runs `body` with any error as a `sy_error`: a ``TransportError`` field for field,
    /// anything else as `unknown`, reason `not a transport error`, naming its type.
    static func withABI<R>(_ error: any Error, _ body: (UnsafePointer<sy_error>) -> R) -> R {
        let transportError = error as? TransportError
            ?? TransportError(
                code: .unknown, reason: .notATransportError,
                message: "the backend threw \(type(of: error)), not a TransportError: \(error)")
        return transportError.withABI(body)
    }

    /// The error the other side passed. Lossless for every field; a code number that is
    /// no code reads as `unknown`, a struct too small to hold the fields as `internal`.
    init(abi error: UnsafePointer<sy_error>?) {
        guard let error, error.pointee.size >= ABISize.error else {
            self.init(
                code: .internal, reason: .protocolViolation,
                message: "a backend library passed \(error == nil ? "no error" : "an error struct too small to read") where an error belonged")
            return
        }
        let value = error.pointee
        let code = (1...255).contains(value.code) ? TransportError.Code(wireValue: UInt8(value.code)) : nil
        var native: NativeError?
        if let domain = value.native_domain {
            native = NativeError(
                domain: NativeError.Domain(String(cString: domain)), code: value.native_code,
                name: value.native_name.map { String(cString: $0) } ?? "")
        }
        self.init(
            code: code ?? .unknown, reason: Reason(value.reason.map { String(cString: $0) } ?? ""),
            message: value.message.map { String(cString: $0) } ?? "", native: native)
    }
}

// MARK: - Endpoints

extension Endpoint {
    /// Runs `body` with this endpoint as a `sy_endpoint`, borrowed for the call.
    func withABI<R>(_ body: (UnsafePointer<sy_endpoint>) -> R) -> R {
        host.withCString { host in
            // Clamped, not trapping: `port` is a `var` a program may have set out of
            // range; the library's side (``init(abi:)``) refuses it with an error.
            var endpoint = sy_endpoint(size: ABISize.endpoint, host: host, port: Int32(clamping: port), path: nil)
            guard let path else { return withUnsafePointer(to: &endpoint, body) }
            return path.withCString { path in
                endpoint.path = path
                return withUnsafePointer(to: &endpoint, body)
            }
        }
    }

    /// The endpoint the other side passed: a path endpoint when `path` is set, else a
    /// host and port.
    /// - Throws: `invalidArgument`, reason `invalid address`, for a struct too small, a
    ///   missing host, or a port out of range.
    init(abi endpoint: UnsafePointer<sy_endpoint>?) throws(TransportError) {
        func bad(_ why: String) -> TransportError {
            TransportError(code: .invalidArgument, reason: .invalidAddress, message: "an endpoint passed to or from a backend library \(why)")
        }
        guard let endpoint, endpoint.pointee.size >= ABISize.endpoint else { throw bad("is missing or too small to read") }
        let value = endpoint.pointee
        if let path = value.path {
            self.init(unixPath: String(cString: path))
            return
        }
        guard let host = value.host else { throw bad("has no host") }
        guard Endpoint.portRange.contains(Int(value.port)) else { throw bad("has invalid port \"\(value.port)\" (0...65535)") }
        self.init(host: String(cString: host), port: Int(value.port))
    }

    /// An address the library reported, for a getter that cannot throw: a malformed one
    /// (a broken library) reads as the empty host with port 0.
    static func reported(by fetch: (sy_endpoint_fn, UnsafeMutableRawPointer) -> Void) -> Endpoint {
        var result: Endpoint?
        withUnsafeMutablePointer(to: &result) { slot in
            fetch({ context, endpoint in
                context!.assumingMemoryBound(to: Endpoint?.self).pointee = try? Endpoint(abi: endpoint)
            }, UnsafeMutableRawPointer(slot))
        }
        return result ?? Endpoint(host: "", port: 0)
    }
}

// MARK: - Durations, configuration, options

extension sy_duration {
    init(_ duration: Duration) {
        self.init(seconds: duration.components.seconds, attoseconds: duration.components.attoseconds)
    }
}

extension Duration {
    init(abi duration: sy_duration) {
        self.init(secondsComponent: duration.seconds, attosecondsComponent: duration.attoseconds)
    }
}

extension TransportConfiguration {
    /// Runs `body` with this configuration as a `sy_configuration`.
    func withABI<R>(_ body: (UnsafePointer<sy_configuration>) -> R) -> R {
        var configuration = sy_configuration(
            size: ABISize.configuration, event_loop_count: eventLoopCount.map { Int64($0) } ?? -1,
            has_stall_timeout: stallTimeout != nil, stall_timeout: sy_duration(stallTimeout ?? .zero),
            reserved_descriptors: Int64(reservedDescriptors), kernel_stall_detection: kernelStallDetection)
        return withUnsafePointer(to: &configuration, body)
    }

    /// The configuration the host passed: the fields its `size` covers, the others at
    /// their defaults.
    /// - Throws: `invalidArgument`, reason `invalid option`, for a struct smaller than the
    ///   first version's.
    init(abi configuration: UnsafePointer<sy_configuration>?) throws(TransportError) {
        guard let configuration, configuration.pointee.size >= ABISize.firstConfiguration else {
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "the host passed a transport configuration too small to read")
        }
        let value = configuration.pointee
        self.init(
            eventLoopCount: value.event_loop_count < 0 ? nil : Int(value.event_loop_count),
            stallTimeout: value.has_stall_timeout ? Duration(abi: value.stall_timeout) : nil,
            reservedDescriptors: Int(value.reserved_descriptors),
            kernelStallDetection: value.size >= ABISize.configurationCovering(\.kernel_stall_detection) ? value.kernel_stall_detection : true)
    }
}

extension ConnectOptions {
    func withABI<R>(_ body: (UnsafePointer<sy_connect_options>) -> R) -> R {
        var options = sy_connect_options(size: ABISize.connectOptions, timeout: sy_duration(timeout))
        return withUnsafePointer(to: &options, body)
    }

    init(abi options: UnsafePointer<sy_connect_options>?) throws(TransportError) {
        guard let options, options.pointee.size >= ABISize.connectOptions else {
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "the host passed connect options too small to read")
        }
        self.init(timeout: Duration(abi: options.pointee.timeout))
    }
}

extension ListenOptions {
    func withABI<R>(_ body: (UnsafePointer<sy_listen_options>) -> R) -> R {
        var options = sy_listen_options(size: ABISize.listenOptions, backlog: Int64(backlog))
        return withUnsafePointer(to: &options, body)
    }

    init(abi options: UnsafePointer<sy_listen_options>?) throws(TransportError) {
        guard let options, options.pointee.size >= ABISize.listenOptions else {
            throw TransportError(code: .invalidArgument, reason: .invalidOption, message: "the host passed listen options too small to read")
        }
        self.init(backlog: Int(options.pointee.backlog))
    }
}

// MARK: - Handles

/// A handle a library gave the host, as a value the host may pass between threads.
///
/// Safety of `@unchecked Sendable`: the ABI lets every handle be used from any thread;
/// the pointer itself is never dereferenced by the host.
struct ForeignHandle: @unchecked Sendable, Hashable {
    let pointer: OpaquePointer
}

/// An object handed across the boundary as an opaque handle (`sy_transport *`, ...):
/// retained for the receiver, who releases it once.
enum Handle {
    static func retained(_ object: AnyObject) -> OpaquePointer {
        OpaquePointer(Unmanaged.passRetained(object).toOpaque())
    }

    static func unretained(_ object: AnyObject) -> OpaquePointer {
        OpaquePointer(Unmanaged.passUnretained(object).toOpaque())
    }

    static func object<T: AnyObject>(_ handle: OpaquePointer?, as type: T.Type = T.self) -> T {
        Unmanaged<T>.fromOpaque(UnsafeRawPointer(handle!)).takeUnretainedValue()
    }

    static func release<T: AnyObject>(_ handle: OpaquePointer?, as type: T.Type) {
        guard let handle else { return }
        Unmanaged<T>.fromOpaque(UnsafeRawPointer(handle)).release()
    }
}

/// A context pointer for a callback: `object` retained until the callback takes it back.
enum CallbackContext {
    static func retained(_ object: AnyObject) -> UnsafeMutableRawPointer {
        Unmanaged.passRetained(object).toOpaque()
    }

    /// The object, released by this call (for a callback that runs once).
    static func take<T: AnyObject>(_ context: UnsafeMutableRawPointer?, as type: T.Type = T.self) -> T {
        Unmanaged<T>.fromOpaque(context!).takeRetainedValue()
    }

    /// The object, still retained (for a callback that runs many times).
    static func borrow<T: AnyObject>(_ context: UnsafeMutableRawPointer?, as type: T.Type = T.self) -> T {
        Unmanaged<T>.fromOpaque(context!).takeUnretainedValue()
    }
}
