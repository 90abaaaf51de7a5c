// The domain's payloads are read and written with RideJSON; its users (the service, the tools, the tests)
// get the reader, the writer and the timestamps with `import RideDomain`.
@_exported import RideJSON

// The contract's vocabulary lives in RideStatusKit (I1's rule first); the domain adds its fast readers and writers
// as extensions. Not re-exported: the kit's payload types and the domain's still share names.
