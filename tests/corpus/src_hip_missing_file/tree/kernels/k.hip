// at the root, not beside sub/
