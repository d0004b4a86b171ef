public import GRPCCore

/// The benchmark's service, `switchyard.bench.Echo`, and its two methods. Every server
/// of the benchmark (C++, grpc-swift, Switchyard) serves these paths.
public enum EchoMethods {
    /// `/switchyard.bench.Echo/Unary`: one message in, the same message back.
    public static let unary = MethodDescriptor(fullyQualifiedService: "switchyard.bench.Echo", method: "Unary")

    /// `/switchyard.bench.Echo/Stream`: bidirectional; each message is sent back as it
    /// arrives, and the call ends (status OK) when the client's stream ends.
    public static let stream = MethodDescriptor(fullyQualifiedService: "switchyard.bench.Echo", method: "Stream")
}
