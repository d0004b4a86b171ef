import GRPCCore

/// A service config's method configs by name, looked up as gRPC does: the method's own
/// config, else its service's (a name with no method), else the default (a name with
/// neither).
struct MethodConfigLookup: Sendable {
    private var byName: [MethodConfig.Name: MethodConfig] = [:]

    init(_ serviceConfig: ServiceConfig) {
        for config in serviceConfig.methodConfig {
            for name in config.names where byName[name] == nil {
                byName[name] = config
            }
        }
    }

    func config(for descriptor: MethodDescriptor) -> MethodConfig? {
        let service = descriptor.service.fullyQualifiedService
        return byName[MethodConfig.Name(service: service, method: descriptor.method)]
            ?? byName[MethodConfig.Name(service: service, method: "")]
            ?? byName[MethodConfig.Name(service: "", method: "")]
    }
}
