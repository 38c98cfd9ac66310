// An app names the SDK's whole API after `import RidePushClient` alone: the snapshot, tick,
// receipt and error types come from RideProtocol, and a snapshot's `state` is the core's enum.
@_exported import RideProtocol
@_exported import enum RideCore.RideState
@_exported import struct RideCore.ZoneRules
