import GRPCCore
import Switchyard
import SwitchyardCalls

// GRPCCore's `Metadata` and the calls engine's `CallMetadata` hold the same pairs: string
// values, and binary values under keys that end in `-bin`.
//
// The keys gRPC keeps for itself (`grpc-` ones but `grpc-status-details-bin`, `te`,
// `content-type`, HTTP/2's connection fields) are left out when GRPCCore's metadata goes
// out: GRPCCore puts its own there (`grpc-timeout`, `grpc-previous-rpc-attempts`,
// `grpc-retry-pushback-ms`), and the engine writes the wire's own fields itself (the
// deadline from the call's timeout). Received metadata never holds them.

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
