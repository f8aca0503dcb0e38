//! Loads globals.yml, passwords.yml, override files and catalog files with spans into the model.
