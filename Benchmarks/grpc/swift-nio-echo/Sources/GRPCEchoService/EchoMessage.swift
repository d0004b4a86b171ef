public import GRPCCore

/// One echo message: the bytes of a gRPC message, exactly as they came off the wire.
///
/// The benchmark's methods carry no protobuf: whatever bytes the client sends, the
/// server sends back, so any gRPC client can drive them with any payload.
public struct EchoMessage: Sendable, Hashable {
    /// The message's bytes.
    public var bytes: [UInt8]

    /// A message holding `bytes`.
    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }
}

/// Serializes an ``EchoMessage`` as its bytes, unchanged (one copy into the transport's
/// buffer).
public struct EchoMessageSerializer: MessageSerializer {
    public init() {}

    public func serialize<Bytes: GRPCContiguousBytes>(_ message: EchoMessage) throws -> Bytes {
        Bytes(message.bytes)
    }
}

/// Deserializes any bytes into an ``EchoMessage`` (one copy out of the transport's
/// buffer); never throws.
public struct EchoMessageDeserializer: MessageDeserializer {
    public init() {}

    public func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> EchoMessage {
        EchoMessage(serializedMessageBytes.withUnsafeBytes { [UInt8]($0) })
    }
}
