// Bridge arrives with the server.
