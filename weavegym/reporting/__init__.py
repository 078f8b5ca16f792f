"""Looking at episodes: the HTML trajectory report, frame overlays, GIF/MP4 export and the live debugger."""
