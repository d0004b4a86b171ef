// The `counted` backend as a library a host loads at run time: the `.dynamic` product
// SwitchyardCountedBackend (libSwitchyardCountedBackend.so). A Switchyard program loads
// it with `--backend-library PATH` (the stock echo-server and echo-client), or finds it
// in a folder of SWITCHYARD_BACKEND_PATH, and then picks `counted` by name.
import SwitchyardBackendLoader
import SwitchyardCounting

// doc-block begin (the guide to writing a backend shows this: SwitchyardConformance.docc)
/// The one symbol a backend library exports: the table of C functions that hands the
/// `counted` backend over (see `LoadableBackend`).
@_cdecl("switchyard_backend_entry")
public func switchyardBackendEntry() -> UnsafeRawPointer {
    LoadableBackend.export(CountedTransport.backend)
}
// doc-block end
