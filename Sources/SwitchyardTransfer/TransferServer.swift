public import Switchyard
import SwitchyardCalls
import Synchronization

/// The receiving side of resumable transfers: a `CallServer` whose calls speak the
/// transfer protocol (``TransferMessage``) and store files through a
/// ``TransferStorage`` (``DirectoryTransferStorage`` for a folder,
/// ``MemoryTransferStorage`` for tests, or your own sink).
///
/// Each transfer is resumable: a sender whose call broke asks again and is told the
/// offset the storage has durably written, with the digest of those bytes (the sender
/// refuses to go on if its source's differ). A known id offered with another size is
/// refused (`failedPrecondition`, reason `source changed`). Each chunk is hashed as it
/// arrives, on a worker rather than the event loop; one that does not match its digest
/// is not stored and the call ends `unavailable`, reason `integrity mismatch`, so the
/// sender sends it again; a file whose transfer digest does not match is discarded
/// (`aborted`, reason `integrity mismatch`). A new call for an id that an open call holds
/// ends that call first (see the protocol).
///
/// Memory: each call asks for one message at a time, so the server holds at most about
/// two chunks (one received, one being hashed and stored) plus one read buffer per open
/// call, whatever its sender does (``bufferedBytes`` counts the read buffer).
public final class TransferServer: Sendable {
    /// The listener's address.
    public let localAddress: Endpoint
    public let storage: any TransferStorage
    public let options: TransferServerOptions
    private let server: CallServer
    private let leases: TransferLeases
    private let finishedStream: AsyncStream<TransferRecord>
    private let finishedContinuation: AsyncStream<TransferRecord>.Continuation

    private init(
        server: CallServer, storage: any TransferStorage, options: TransferServerOptions, leases: TransferLeases,
        finished: (AsyncStream<TransferRecord>, AsyncStream<TransferRecord>.Continuation)
    ) {
        self.server = server
        self.localAddress = server.localAddress
        self.storage = storage
        self.options = options
        self.leases = leases
        (finishedStream, finishedContinuation) = finished
    }

    /// Listens on `endpoint` with `transport` and stores what arrives in `storage`.
    /// - Throws: the listen's `TransportError`.
    public static func start(
        transport: any Transport, on endpoint: Endpoint, storage: any TransferStorage,
        options: TransferServerOptions = TransferServerOptions()
    ) async throws -> TransferServer {
        let leases = TransferLeases()
        let finished = AsyncStream<TransferRecord>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let continuation = finished.continuation
        let receiver = TransferReceiver(storage: storage, options: options, leases: leases) { record in
            continuation.yield(record)
        }
        let server = try await CallServer.start(transport: transport, on: endpoint, options: options.callOptions) { call in
            try await receiver.serve(call)
        }
        return TransferServer(server: server, storage: storage, options: options, leases: leases, finished: finished)
    }

    /// Listens in `directory` (``DirectoryTransferStorage``): finished files are
    /// `directory/<id>`.
    public static func start(
        transport: any Transport, on endpoint: Endpoint, directory: String,
        options: TransferServerOptions = TransferServerOptions()
    ) async throws -> TransferServer {
        try await start(transport: transport, on: endpoint, storage: try DirectoryTransferStorage(directory: directory), options: options)
    }

    /// Every transfer that finished (received whole, digests checked, stored), in order.
    /// One consumer; ends when ``serve()`` returns (after ``close()``, once the open
    /// transfers ended), or at ``closeNow()``. Unread, the newest 1,024 are kept.
    public var finished: AsyncStream<TransferRecord> { finishedStream }

    /// Transfer calls open now (counting those still before their offer).
    public var openCalls: Int { server.openCalls }

    /// Transfers being received now: a call's handler holds its transfer's id from the
    /// offer until its last sync is done, which can be a little after the call ended.
    /// Zero once every handler let go (a test waits for it before it reopens the folder
    /// with another storage, as a restarted receiver would).
    public var activeTransfers: Int { leases.calls.count }

    /// Bytes received by open transfer calls and not yet handed to the storage (the
    /// calls' `Call.bufferedBytes`).
    public var bufferedBytes: Int {
        leases.calls.reduce(0) { $0 + $1.call.bufferedBytes }
    }

    /// Ends every open transfer call now with `unavailable`, reason `reset` (the status
    /// goes to the senders, which resume; other calls on their connections go on). What
    /// was synced stays.
    public func resetOpenTransfers() {
        let reset = TransportError(code: .unavailable, reason: .reset, message: "the transfer server reset the transfer")
        for call in leases.calls { call.call.finish(CallStatus(error: reset)) }
    }

    /// Waits until the server stopped: closed, every transfer call ended and its handler
    /// returned (its last sync done). Cancelling the waiting task closes the server with
    /// ``closeNow()``; the wait still ends only once the handlers returned. See
    /// `CallServer.serve()`.
    public func serve() async {
        await withTaskCancellationHandler {
            await server.serve()
        } onCancel: {
            self.closeNow()
        }
        finishedContinuation.finish()
    }

    /// Stops accepting; open transfers go on (``serve()`` returns once they ended).
    public func close() {
        server.close()
    }

    /// Stops accepting and ends every open transfer call.
    public func closeNow() {
        server.closeNow()
        finishedContinuation.finish()
    }
}
