# Wrong: no max subtraction; math.exp overflows (OverflowError) once scores pass 709.
import ai006_reference as ref

ref.SHIFT = lambda scores: 0.0
ref.main()
