// grpc-echo-server: the echo service of Protos/echo.proto on grpc-swift 2's GRPCCore, over
// SwitchyardGRPC's server transport on a backend of Switchyard's registry.
//
//     grpc-echo-server [--host H] [--port P] [--backend bsd|libuv]
//
// Prints `grpc-echo-server (BACKEND) listening on HOST:PORT` once it accepts calls
// (`--port 0` takes a free port) and serves until it is killed (Ctrl-C).

import ArgumentParser
import EchoService
import Glibc
import GRPCCore
import Switchyard
import SwitchyardBackends
import SwitchyardGRPC

/// The service: `Get` answers with the request's text, `Expand` with each of its words.
struct Echo: Example_Echo_Echo.SimpleServiceProtocol {
    func get(request: Example_Echo_EchoRequest, context: ServerContext) async throws -> Example_Echo_EchoResponse {
        var response = Example_Echo_EchoResponse()
        response.text = request.text
        return response
    }

    func expand(
        request: Example_Echo_EchoRequest, response: RPCWriter<Example_Echo_EchoResponse>, context: ServerContext
    ) async throws {
        guard request.repeat >= 0, request.repeat <= 100 else {
            throw RPCError(code: .invalidArgument, message: "repeat \(request.repeat) is not within 0...100")
        }
        for _ in 0..<max(1, Int(request.repeat)) {
            for word in request.text.split(whereSeparator: \.isWhitespace) {
                var message = Example_Echo_EchoResponse()
                message.text = String(word)
                try await response.write(message)
            }
        }
    }
}

@main
struct EchoServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "grpc-echo-server", abstract: "The echo service on GRPCCore over a Switchyard backend.")

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on; 0 takes a free one.")
    var port = 50051

    @Option(help: "The backend: 'bsd' or 'libuv' (default: $SWITCHYARD_BACKEND, else 'bsd').")
    var backend: String?

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
        // The backend's transport must live as long as the server listens on it.
        let transport = try Backends.makeTransport(named: backend, configuration: TransportConfiguration())
        let serverTransport = SwitchyardServerTransport.switchyard(
            address: Endpoint(host: host, port: port), transport: transport)
        let server = GRPCServer(transport: serverTransport, services: [Echo()])
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.serve() }
            let address = try await serverTransport.listeningAddress
            print("grpc-echo-server (\(Backends.selectedName(explicit: backend))) listening on \(host):\(address.port)")
            // Standard output to a file or a pipe is block-buffered: a script waiting for
            // this line must see it now.
            fflush(nil)
            try await group.waitForAll()
        }
        await transport.shutdownNow()
    }
}
