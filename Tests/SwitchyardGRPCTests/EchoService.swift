import GRPCCore
import Synchronization

/// Messages as they are: the bytes GRPCCore gets are the message (no copy when the
/// transport's bytes are `[UInt8]`, as Switchyard's are).
struct BytesCoder: MessageSerializer, MessageDeserializer {
    typealias Message = [UInt8]

    func serialize<Bytes: GRPCContiguousBytes>(_ message: [UInt8]) throws -> Bytes {
        if let bytes = message as? Bytes { return bytes }
        return Bytes(message)
    }

    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> [UInt8] {
        if let bytes = serializedMessageBytes as? [UInt8] { return bytes }
        return serializedMessageBytes.withUnsafeBytes { Array($0) }
    }
}

/// What the echo service's handlers saw, for the tests to wait on.
final class Probe: Sendable {
    private struct State {
        var started = 0
        var cancelled = 0
        var peers: [String] = []
        var released = false
    }
    private let state = Mutex(State())

    var started: Int { state.withLock { $0.started } }
    var cancelled: Int { state.withLock { $0.cancelled } }
    var peers: [String] { state.withLock { $0.peers } }

    func didStart(peer: String) -> Int {
        state.withLock { state in
            state.started += 1
            state.peers.append(peer)
            return state.started
        }
    }

    func didSeeCancellation() { state.withLock { $0.cancelled += 1 } }

    /// Lets every ``waitForRelease()`` return.
    func release() { state.withLock { $0.released = true } }

    /// Returns once released, or once the task is cancelled.
    func waitForRelease() async {
        while !state.withLock({ $0.released }), !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Polls `condition` every 10 ms for up to `seconds`.
    func wait(seconds: Double = 5, until condition: (Probe) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if condition(self) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition(self)
    }
}

/// An echo service written by hand (no protobuf): `echo.Echo`.
///
/// - `Get` (unary): the request back. Request metadata under `x-` keys comes back in the
///   response's metadata and in its trailers; `fail-code` (a status code's number) and
///   `fail-message` make it throw that `RPCError` instead, with `fail-pushback-ms` as
///   `grpc-retry-pushback-ms` in the error's metadata. The request's `grpc-timeout`, as
///   GRPCCore's server saw it, comes back as `x-grpc-timeout`.
/// - `Collect` (client streaming): the requests joined.
/// - `Expand` (server streaming): the request `count` times (metadata `count`, default
///   3); with metadata `hold`, then waits until the probe's release or the RPC's
///   cancellation.
/// - `Update` (bidirectional): each request back as it comes.
/// - `Wait` (unary): waits until cancelled (the probe counts it) or released.
/// - `Flaky` (unary): the first call waits until cancelled or released; later ones
///   answer at once.
struct EchoService: RegistrableRPCService {
    static let service = "echo.Echo"
    static let get = MethodDescriptor(fullyQualifiedService: service, method: "Get")
    static let collect = MethodDescriptor(fullyQualifiedService: service, method: "Collect")
    static let expand = MethodDescriptor(fullyQualifiedService: service, method: "Expand")
    static let update = MethodDescriptor(fullyQualifiedService: service, method: "Update")
    static let wait = MethodDescriptor(fullyQualifiedService: service, method: "Wait")
    static let flaky = MethodDescriptor(fullyQualifiedService: service, method: "Flaky")

    let probe: Probe

    init(probe: Probe = Probe()) { self.probe = probe }

    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        let coder = BytesCoder()
        let probe = self.probe
        router.registerHandler(forMethod: Self.get, deserializer: coder, serializer: coder) { request, context in
            _ = probe.didStart(peer: context.remotePeer)
            var echoed = Metadata()
            for (key, value) in request.metadata where key.hasPrefix("x-") {
                switch value {
                case .string(let string): echoed.addString(string, forKey: key)
                case .binary(let bytes): echoed.addBinary(bytes, forKey: key)
                }
            }
            // The deadline GRPCCore's server derived its handler's from (the transport
            // hands over the request's grpc-timeout).
            if let timeout = request.metadata[stringValues: "grpc-timeout"].first(where: { _ in true }) {
                echoed.addString(timeout, forKey: "x-grpc-timeout")
            }
            if let code = request.metadata[stringValues: "fail-code"].first(where: { _ in true }).flatMap(Int.init),
                let status = Status.Code(rawValue: code), let rpcCode = RPCError.Code(status)
            {
                var metadata = Metadata()
                if let pushback = request.metadata[stringValues: "fail-pushback-ms"].first(where: { _ in true }) {
                    metadata.addString(pushback, forKey: "grpc-retry-pushback-ms")
                }
                throw RPCError(
                    code: rpcCode, message: request.metadata[stringValues: "fail-message"].first(where: { _ in true }) ?? "",
                    metadata: metadata)
            }
            var messages: [[UInt8]] = []
            for try await message in request.messages { messages.append(message) }
            let reply = messages.first ?? []
            let trailers = echoed
            return StreamingServerResponse(metadata: echoed) { writer in
                try await writer.write(reply)
                return trailers
            }
        }
        router.registerHandler(forMethod: Self.collect, deserializer: coder, serializer: coder) { request, context in
            _ = probe.didStart(peer: context.remotePeer)
            var joined: [UInt8] = []
            for try await message in request.messages { joined += message }
            return StreamingServerResponse(single: ServerResponse(message: joined))
        }
        router.registerHandler(forMethod: Self.expand, deserializer: coder, serializer: coder) { request, context in
            _ = probe.didStart(peer: context.remotePeer)
            var messages: [[UInt8]] = []
            for try await message in request.messages { messages.append(message) }
            let count = request.metadata[stringValues: "count"].first(where: { _ in true }).flatMap(Int.init) ?? 3
            let hold = !Array(request.metadata[stringValues: "hold"]).isEmpty
            let reply = messages.first ?? []
            return StreamingServerResponse { writer in
                for _ in 0..<count { try await writer.write(reply) }
                if hold { await Self.waitForReleaseOrCancellation(probe, context) }
                return [:]
            }
        }
        router.registerHandler(forMethod: Self.update, deserializer: coder, serializer: coder) { request, context in
            _ = probe.didStart(peer: context.remotePeer)
            return StreamingServerResponse { writer in
                for try await message in request.messages { try await writer.write(message) }
                return [:]
            }
        }
        router.registerHandler(forMethod: Self.wait, deserializer: coder, serializer: coder) { request, context in
            _ = probe.didStart(peer: context.remotePeer)
            await Self.waitForReleaseOrCancellation(probe, context)
            return StreamingServerResponse(single: ServerResponse(message: []))
        }
        router.registerHandler(forMethod: Self.flaky, deserializer: coder, serializer: coder) { request, context in
            let attempt = probe.didStart(peer: context.remotePeer)
            if attempt == 1 { await Self.waitForReleaseOrCancellation(probe, context) }
            return StreamingServerResponse(single: ServerResponse(message: Array("attempt \(attempt)".utf8)))
        }
    }

    /// Returns when the probe is released, or when the RPC is cancelled (counted).
    static func waitForReleaseOrCancellation(_ probe: Probe, _ context: ServerContext) async {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await probe.waitForRelease()
                return false
            }
            group.addTask {
                do {
                    try await context.cancellation.cancelled
                    return true
                } catch {
                    return Task.isCancelled
                }
            }
            let cancelled = await group.next() ?? false
            if cancelled { probe.didSeeCancellation() }
            group.cancelAll()
        }
    }
}
