from jitguard.cli import main

main(prog_name="jitguard")
