// The `lossy` backend as a library a host loads at run time: the `.dynamic` product
// SwitchyardLossyBackend (libSwitchyardLossyBackend.so), for showing that the
// conformance kit fails a backend that loses bytes
// (`swift package conformance --backend-product SwitchyardLossyBackend --backend lossy`).
import SwitchyardBackendLoader
import SwitchyardCounting

/// The one symbol a backend library exports: the table of C functions that hands the
/// `lossy` backend over (see `LoadableBackend`).
@_cdecl("switchyard_backend_entry")
public func switchyardBackendEntry() -> UnsafeRawPointer {
    LoadableBackend.export(LossyTransport.backend)
}
