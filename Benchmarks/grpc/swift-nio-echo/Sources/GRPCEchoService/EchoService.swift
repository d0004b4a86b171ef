public import GRPCCore

/// The echo service on grpc-swift 2's router, registered by hand (no generated code):
/// ``EchoMethods/unary`` answers one message with itself, ``EchoMethods/stream`` writes
/// back each message it reads, in order, and ends with status OK after the client's
/// stream ends. A unary call whose request has no message fails with `internal` (the
/// router's own check for a unary request).
public struct EchoService: RegistrableRPCService {
    public init() {}

    public func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(
            forMethod: EchoMethods.unary,
            deserializer: EchoMessageDeserializer(),
            serializer: EchoMessageSerializer()
        ) { request, _ in
            let single = try await ServerRequest(stream: request)
            return StreamingServerResponse(single: ServerResponse(message: single.message))
        }
        router.registerHandler(
            forMethod: EchoMethods.stream,
            deserializer: EchoMessageDeserializer(),
            serializer: EchoMessageSerializer()
        ) { request, _ in
            StreamingServerResponse { writer in
                for try await message in request.messages {
                    try await writer.write(message)
                }
                return [:]
            }
        }
    }
}
