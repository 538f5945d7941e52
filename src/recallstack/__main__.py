from recallstack.cli import main

main()
