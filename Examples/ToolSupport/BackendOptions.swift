public import ArgumentParser
public import Switchyard
import SwitchyardBackends

/// `--backend NAME` and `--backend-library PATH`, the backend a tool runs on: one rule for
/// echo-server, echo-client, transfer-server and transfer-client (`@OptionGroup`).
public struct BackendOptions: ParsableArguments, Sendable {
    @Option(help: "The backend (default: $\(BackendRegistry.environmentVariable), else '\(Backends.defaultName)'). Registered: \(Backends.registry.names.joined(separator: ", ")), and those of the backend libraries loaded.")
    public var backend: String?

    @Option(
        name: .customLong("backend-library"),
        help: ArgumentHelp(
            Backends.libraryOptionHelp,
            valueName: "path"))
    public var backendLibraries: [String] = []

    public init() {}

    /// Loads the libraries and checks that the backend is registered (`--backend`, else
    /// `SWITCHYARD_BACKEND`): an unknown name is a bad argument that names the registered ones.
    public func validate() throws {
        do {
            try Backends.checkSelection(explicit: backend, libraries: backendLibraries)
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// The backend's name: `--backend`, else `SWITCHYARD_BACKEND`, else the default.
    public var selectedName: String { Backends.selectedName(explicit: backend) }

    /// A transport of the selected backend; a failure ends the tool (exit 1) with
    /// `cannot start backend 'NAME': ...`.
    public func makeTransport(configuration: TransportConfiguration, tool: String) -> any Transport {
        let name = selectedName
        do {
            return try Backends.makeTransport(named: name, configuration: configuration)
        } catch {
            ToolOutput.fail(tool: tool, "cannot start backend '\(name)': \(error)")
        }
    }
}
