//! Store backends of Sesame.
