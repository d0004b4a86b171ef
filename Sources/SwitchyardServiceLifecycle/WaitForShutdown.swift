import ServiceLifecycle

/// Returns on the service's graceful shutdown or its task's cancellation, whichever
/// comes first: how a `run()` with nothing to serve waits for its end.
func waitForShutdown() async {
    try? await gracefulShutdown()
}
