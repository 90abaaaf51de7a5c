enum PlaceholderRideDomain {}
