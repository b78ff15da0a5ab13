# Wrong: scales every head by √d instead of √hd (the lesson's §08, first row).
import ai031_reference as ref

ref.HEAD_SCALE = lambda d, hd: d
ref.main()
