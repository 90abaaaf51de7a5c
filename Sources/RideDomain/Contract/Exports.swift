// The domain's payloads are read and written with RideJSON; its users (the service, the tools, the tests)
// get the reader, the writer and the timestamps with `import RideDomain`.
@_exported import RideJSON
