import GRPCCore
import Switchyard
import SwitchyardCalls

// GRPCCore's `Metadata` and the calls engine's `CallMetadata` hold the same pairs: string
// values, and binary values under keys that end in `-bin`.
//
// The keys gRPC keeps for itself (`CallMetadata.isReservedForGRPC(key:)`: `grpc-` ones
// but those below, `te`, `content-type`, HTTP/2's connection fields) are left out when
// GRPCCore's metadata goes out, and received metadata never holds them: the engine writes
// the wire's own fields itself. GRPCCore puts `grpc-timeout` in a client's request
// metadata; the engine sends the call's deadline from its timeout instead (ClientTransport),
// and a server hands GRPCCore the request's own (`Metadata(requestOf:)`).
//
// Two `grpc-` keys GRPCCore reads and writes go on the wire as metadata, as gRPC says they
// do, and pass both ways: `grpc-retry-pushback-ms` (a server's trailers; GRPCCore's retry
// executor reads it from the error's metadata, gRFC A6) and `grpc-previous-rpc-attempts`
// (a retried request's headers, A6). So does `grpc-status-details-bin`.

extension CallMetadata {
    /// GRPCCore's `metadata` as call metadata (see the file's header for the keys left
    /// out). A string value under a `-bin` key is taken as base64 (GRPCCore allows one);
    /// one that is not base64 is left out.
    /// - Throws: `RPCError` `invalidArgument` for a key or value ``CallMetadata`` refuses
    ///   (a key with a character gRPC does not allow, a control character in a value).
    init(grpc metadata: Metadata) throws(RPCError) {
        self.init()
        for (key, value) in metadata {
            let lowered = key.lowercased()
            if CallMetadata.isReservedForGRPC(key: lowered) { continue }
            let converted: CallMetadata.Value
            switch value {
            case .string(let string):
                if lowered.hasSuffix("-bin") {
                    guard let bytes = GRPCBase64.decode(Array(string.utf8)) else { continue }
                    converted = .binary(bytes)
                } else {
                    converted = .string(string)
                }
            case .binary(let bytes):
                converted = .binary(bytes)
            }
            do {
                try add(converted, forKey: lowered)
            } catch {
                throw error.rpcError
            }
        }
    }
}

extension Metadata {
    /// A server call's request metadata for GRPCCore: the client's, then, when the request
    /// had a deadline, the time left as `grpc-timeout` (GRPCCore's server derives the
    /// handler's deadline from it; the time is rounded up, as gRPC never makes a deadline
    /// earlier, and one already past is `1n`).
    init(requestOf call: Call) {
        self.init(call.metadata)
        if let deadline = call.requestDeadline {
            addString(GRPCTimeout(rounding: deadline - .now).description, forKey: "grpc-timeout")
        }
    }

    /// Call metadata as GRPCCore's `Metadata`, in order.
    init(_ metadata: CallMetadata) {
        self.init()
        reserveCapacity(metadata.count)
        for entry in metadata {
            switch entry.value {
            case .string(let string): addString(string, forKey: entry.key)
            case .binary(let bytes): addBinary(bytes, forKey: entry.key)
            }
        }
    }
}
