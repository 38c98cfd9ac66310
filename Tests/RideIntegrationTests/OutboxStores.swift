import Foundation
import XCTest
import RideCore
import RideWebhooks
@testable import RideStore
@testable import RideStorePostgres
@testable import RideStoreSQLite

/// The stores the outbox contract runs on.
enum OutboxStoreKind: String { case memory, sqlite, postgres }

extension StoreDirectoryTestCase {
    /// Runs `body` with a fresh store of each kind and an outbox reading it: memory (a
    /// `MemoryOutbox` the store hands events to), an SQLite file (its own connection) and
    /// PostgreSQL (its own connection, leases and due instants on `pgClock`).
    func forEachOutboxStore(pgClock: ManualClock, _ body: (OutboxStoreKind, any RideStore, any WebhookOutbox) throws -> Void) throws {
        let memoryOutbox = MemoryOutbox()
        try body(.memory, MemoryStore(outbox: memoryOutbox), memoryOutbox)
        let sqlite = try SQLiteStore(path: path)
        let sqliteOutbox = try SQLiteOutbox(path: path)
        try body(.sqlite, sqlite, sqliteOutbox)
        sqliteOutbox.close()
        sqlite.close()
        let pg = try TestPostgres.shared()
        let settings = pg.settings(database: try pg.createDatabase())
        let store = try PostgresStore(settings)
        let outbox = PostgresOutbox(settings, clock: pgClock)
        try body(.postgres, store, outbox)
        outbox.close()
        store.close()
    }
}
