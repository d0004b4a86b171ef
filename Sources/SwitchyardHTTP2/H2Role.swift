/// Which end of an HTTP/2 connection a state machine is (RFC 9113 section 5.1.1): the
/// client opens streams (odd identifiers) and sends requests; the server answers them.
/// Neither side pushes (gRPC never does): there are no server-initiated streams.
package enum H2Role: Sendable, Hashable {
    case client
    case server
}
