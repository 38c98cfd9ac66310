import RideService
import CLibWebSockets
import Foundation

extension Hub {
    /// The C structures lws kept pointers to, freed once every context is destroyed (run's
    /// end), so a clean stop leaves nothing behind for LeakSanitizer (make asan) to report.
    func freeContextStructures() {
        for i in 0..<2 { free(UnsafeMutableRawPointer(mutating: protocols[i].name)) }
        protocols.deallocate()
        var option: UnsafePointer<lws_protocol_vhost_options>? = UnsafePointer(securityHeaders)
        while let o = option {
            free(UnsafeMutableRawPointer(mutating: o.pointee.name))
            free(UnsafeMutableRawPointer(mutating: o.pointee.value))
            option = o.pointee.next
        }
        securityHeaders.deallocate()
        noValidityTimers.deallocate()
        if let (cert, key) = tlsPathsC { free(cert); free(key) }
    }
}
