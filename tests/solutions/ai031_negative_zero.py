# Wrong: prints "-0.00" for tiny negative values.
import ai031_reference as ref

ref.FORMAT = lambda x: f"{x:.2f}"
ref.main()
