enum PlaceholderRideStatusService {}
