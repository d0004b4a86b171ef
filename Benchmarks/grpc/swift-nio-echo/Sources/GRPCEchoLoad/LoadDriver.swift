public import GRPCCore
public import GRPCEchoService

/// Drives one load against the echo service on `client` and checks every echo: a unary
/// response must equal the request, a streamed message must have the request's size.
/// A call that fails, or an echo that differs, ends the load with an error.
public struct LoadDriver<Transport: ClientTransport>: Sendable {
    let client: GRPCClient<Transport>
    let payload: EchoMessage

    /// A driver of `client` whose every request carries `payload`.
    public init(client: GRPCClient<Transport>, payload: EchoMessage) {
        self.client = client
        self.payload = payload
    }

    /// `concurrency` tasks, each making unary calls one after another until `seconds`
    /// have passed.
    public func unary(concurrency: Int, seconds: Double) async throws -> LoadResult {
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + .seconds(seconds)
        let request = ClientRequest(message: self.payload)
        let expected = self.payload
        let client = self.client
        var result = LoadResult()
        try await withThrowingTaskGroup(of: [Int64].self) { tasks in
            for _ in 0..<concurrency {
                tasks.addTask {
                    var latencies: [Int64] = []
                    latencies.reserveCapacity(65_536)
                    while clock.now < deadline {
                        let began = clock.now
                        let echoed = try await client.unary(
                            request: request,
                            descriptor: EchoMethods.unary,
                            serializer: EchoMessageSerializer(),
                            deserializer: EchoMessageDeserializer(),
                            options: .defaults
                        ) { response in
                            try response.message
                        }
                        latencies.append(Self.nanoseconds(began.duration(to: clock.now)))
                        guard echoed == expected else { throw EchoMismatch() }
                    }
                    return latencies
                }
            }
            for try await latencies in tasks {
                result.latenciesNanoseconds.append(contentsOf: latencies)
            }
        }
        result.seconds = Self.seconds(start.duration(to: clock.now))
        result.messages = result.latenciesNanoseconds.count
        result.bytes = result.messages * self.payload.bytes.count
        return result
    }

    /// `concurrency` bidirectional calls, each writing the payload as fast as the
    /// transport takes it until `seconds` have passed, then ending its stream and
    /// reading the rest of the echoes; counts the messages echoed.
    public func stream(concurrency: Int, seconds: Double) async throws -> LoadResult {
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + .seconds(seconds)
        let payload = self.payload
        let client = self.client
        let size = payload.bytes.count
        var result = LoadResult()
        try await withThrowingTaskGroup(of: Int.self) { tasks in
            for _ in 0..<concurrency {
                tasks.addTask {
                    let request = StreamingClientRequest<EchoMessage> { writer in
                        while clock.now < deadline {
                            try await writer.write(payload)
                        }
                    }
                    return try await client.bidirectionalStreaming(
                        request: request,
                        descriptor: EchoMethods.stream,
                        serializer: EchoMessageSerializer(),
                        deserializer: EchoMessageDeserializer(),
                        options: .defaults
                    ) { response in
                        var count = 0
                        for try await message in response.messages {
                            guard message.bytes.count == size else { throw EchoMismatch() }
                            count += 1
                        }
                        return count
                    }
                }
            }
            for try await count in tasks {
                result.messages += count
            }
        }
        result.seconds = Self.seconds(start.duration(to: clock.now))
        result.bytes = result.messages * size
        return result
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(nanoseconds(duration)) / 1e9
    }
}

/// An echo that is not what was sent.
public struct EchoMismatch: Error, CustomStringConvertible {
    public var description: String { "the server's echo differs from the message sent" }
}
