print("ridepush: under construction")
