import GRPCCore
import Switchyard
import SwitchyardCalls
import Synchronization

/// One RPC of a ``SwitchyardServerTransport``: a server call of the calls engine as
/// GRPCCore's stream, handed to the server's stream handler.
///
/// The request: the client's metadata first, then its messages (each read from the
/// network only when the handler asks for it), ending when the client finished sending.
/// The response: GRPCCore writes its metadata (sent as the response's headers), its
/// messages, then the status with the trailers, which ends the call.
///
/// The request's deadline (its `grpc-timeout`, which the calls engine's server enforces
/// itself) is handed to GRPCCore as the time left, under `grpc-timeout` in the request's
/// metadata, where GRPCCore's server reads it: the handler's `ServerContext.cancellation`
/// is cancelled when it passes.
///
/// When the call ends otherwise (the client cancelled it with RST_STREAM, its connection
/// broke, the server closed now, a suspend ended it), the RPC's cancellation handle
/// (`ServerContext.cancellation`) is cancelled, so the handler learns it.
enum ServerStream {
    /// Serves `call` with `handler`; returns the status the call ended with (or ends with,
    /// when GRPCCore wrote none: `unknown`).
    static func serve(
        _ call: AsyncCall,
        handler: @escaping @Sendable (RPCStream<ServerTransportInbound, ServerTransportOutbound>, ServerContext) async -> Void
    ) async -> CallStatus {
        let descriptor = MethodDescriptor(path: call.method)
        let writer = ServerWriter(call: call)
        let connection = call.call.connection
        let remotePeer = connection.remoteAddress.grpcPeer
        let localPeer = connection.localAddress.grpcPeer
        await withServerContextRPCCancellationHandle { handle in
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    // The end of the call: one the handler did not write is a cancellation.
                    _ = await call.status()
                    if !writer.statusWritten { handle.cancel() }
                }
                let stream = RPCStream(
                    descriptor: descriptor,
                    inbound: RPCAsyncSequence(wrapping: ServerInbound(call: call)),
                    outbound: RPCWriter.Closable(wrapping: writer))
                let context = ServerContext(descriptor: descriptor, remotePeer: remotePeer, localPeer: localPeer, cancellation: handle)
                await handler(stream, context)
                if !writer.statusWritten {
                    // GRPCCore always writes a status; a handler of another kind may not.
                    try? await writer.write(
                        .status(Status(code: .unknown, message: "the RPC's handler returned without a status"), [:]))
                }
                await group.waitForAll()
            }
        }
        return await call.status()
    }
}

typealias ServerTransportInbound = RPCAsyncSequence<RPCRequestPart<[UInt8]>, any Error>
typealias ServerTransportOutbound = RPCWriter<RPCResponsePart<[UInt8]>>.Closable

extension MethodDescriptor {
    /// The method of a request's `:path`, `/package.Service/Method` (the server's call
    /// sees the path the client sent); a path without a second `/` is a method of no
    /// service.
    init(path: String) {
        let trimmed = path.hasPrefix("/") ? path.dropFirst() : Substring(path)
        if let slash = trimmed.lastIndex(of: "/") {
            self.init(fullyQualifiedService: String(trimmed[..<slash]), method: String(trimmed[trimmed.index(after: slash)...]))
        } else {
            self.init(fullyQualifiedService: "", method: String(trimmed))
        }
    }
}

/// GRPCCore's view of a server call's request: the metadata, then the messages.
struct ServerInbound: AsyncSequence, Sendable {
    typealias Element = RPCRequestPart<[UInt8]>
    typealias Failure = any Error
    let call: AsyncCall

    struct AsyncIterator: AsyncIteratorProtocol {
        let call: AsyncCall
        var metadataDelivered = false

        mutating func next() async throws -> RPCRequestPart<[UInt8]>? {
            if !metadataDelivered {
                metadataDelivered = true
                return .metadata(Metadata(requestOf: call.call))
            }
            do {
                return try await call.next().map { .message($0) }
            } catch {
                throw rpcError(error)
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(call: call) }
}

/// GRPCCore's writer of a server call's response.
final class ServerWriter: ClosableRPCWriterProtocol {
    typealias Element = RPCResponsePart<[UInt8]>
    let call: AsyncCall
    private let written = Atomic<Bool>(false)

    init(call: AsyncCall) { self.call = call }

    /// Whether the status was written (the call ended as GRPCCore said).
    var statusWritten: Bool { written.load(ordering: .acquiring) }

    func write(_ element: RPCResponsePart<[UInt8]>) async throws {
        do {
            switch element {
            case .metadata(let metadata):
                try await call.sendResponseMetadata(CallMetadata(grpc: metadata))
            case .message(let message):
                try await call.write(message)
            case .status(let status, let trailers):
                written.store(true, ordering: .releasing)
                // Trailers that cannot go out leave the status to say so.
                var status = status
                do {
                    call.setTrailingMetadata(try CallMetadata(grpc: trailers))
                } catch {
                    status = Status(code: .internalError, message: "the RPC's trailers cannot be sent: \(error.message)")
                }
                try await call.finish(CallStatus(grpc: status))
            }
        } catch {
            throw rpcError(error)
        }
    }

    func write(contentsOf elements: some Sequence<RPCResponsePart<[UInt8]>>) async throws {
        for element in elements { try await write(element) }
    }

    /// The status ends the call: nothing to do here.
    func finish() async {}

    /// Resets the call's stream (RST_STREAM CANCEL).
    func finish(throwing error: any Error) async {
        call.cancel()
    }
}
