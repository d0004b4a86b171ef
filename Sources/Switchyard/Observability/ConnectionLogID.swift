/// The `switchyard.connection_id` that log lines carry for a connection: the connection
/// object's identity in hex, unique among the open connections of a process. One rule for
/// the call lines (``CallObserver``) and the toolkit's connection lines
/// (`TransportLogging.connectionID`), so a call's line and its connection's lines match.
package enum ConnectionLogID {
    package static func of(_ connection: some AnyObject) -> String {
        String(UInt(bitPattern: ObjectIdentifier(connection).hashValue), radix: 16)
    }
}
