from brainmap.cli import main

main()
