// grpc-echo-client: calls the echo service of Protos/echo.proto (grpc-echo-server) with
// grpc-swift 2's GRPCCore, over SwitchyardGRPC's client transport on a backend of
// Switchyard's registry: `Get` once, then `Expand`, printing each response.
//
//     grpc-echo-client [--host H] [--port P] [--backend bsd|libuv] [--repeat N] [TEXT]

import ArgumentParser
import EchoService
import GRPCCore
import Switchyard
import SwitchyardBackends
import SwitchyardGRPC

@main
struct EchoClient: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "grpc-echo-client", abstract: "Calls the echo service with GRPCCore over a Switchyard backend.")

    @Option(help: "The server's host.")
    var host = "127.0.0.1"

    @Option(help: "The server's port.")
    var port = 50051

    @Option(help: "The backend: 'bsd' or 'libuv' (default: $SWITCHYARD_BACKEND, else 'bsd').")
    var backend: String?

    @Option(name: .customLong("repeat"), help: "How many times Expand sends the words.")
    var repetitions = 1

    @Argument(help: "The text to send.")
    var text = "hello from switchyard"

    func validate() throws {
        do {
            try Endpoint.validate(port: port)
            try Endpoint.validate(host: host)
            try Backends.checkSelection(explicit: backend, libraries: [])
        } catch {
            throw ValidationError(error.message)
        }
    }

    func run() async throws {
        let transport = try Backends.makeTransport(named: backend, configuration: TransportConfiguration())
        let clientTransport = SwitchyardClientTransport.switchyard(
            target: Endpoint(host: host, port: port), transport: transport)
        var request = Example_Echo_EchoRequest()
        request.text = text
        request.repeat = Int32(clamping: repetitions)
        var options = CallOptions.defaults
        options.timeout = .seconds(10)
        do {
            try await withGRPCClient(transport: clientTransport) { client in
                let echo = Example_Echo_Echo.Client(wrapping: client)
                let answer = try await echo.get(request, options: options)
                print("Get: \(answer.text)")
                try await echo.expand(request, options: options) { response in
                    for try await message in response.messages {
                        print("Expand: \(message.text)")
                    }
                }
            }
        } catch {
            await transport.shutdownNow()
            throw error
        }
        await transport.shutdownNow()
    }
}
