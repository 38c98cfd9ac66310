import RideCore
