// A backend library for the loading tests (Tests/SwitchyardBackendsTests): the bsd
// backend exported through the C entry point under the name "bsd-loaded", built as the
// `.dynamic` product SwitchyardBSDLoadedFixture (libSwitchyardBSDLoadedFixture.so). It
// carries its own copy of Switchyard, the toolkit and bsd, as any backend library does.
import SwitchyardBSD
import SwitchyardBackendKit
import SwitchyardBackendLoader

// doc-block begin (the toolkit's article LoadingABackend.md shows this entry point; the loading tests load and run it)
@_cdecl("switchyard_backend_entry")
public func switchyardBackendEntry() -> UnsafeRawPointer {
    var backend = BSDTransport.backend
    backend.name = "bsd-loaded"
    backend.summary = "bsd, loaded from a shared library (a test fixture)"
    return LoadableBackend.export(backend)
}
// doc-block end
