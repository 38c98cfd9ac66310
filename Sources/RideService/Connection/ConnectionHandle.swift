/// How the service names a connection of the adapter's socket layer without knowing that
/// layer: bits the adapter chose (lws's connection pointer) and maps back, never read here.
/// A word, like the pointer it replaces, so a session stays the same heap block.
package struct ConnectionHandle: Hashable, Sendable {
    package let bits: UInt
    package init(bits: UInt) { self.bits = bits }
}
