from neo_assets.cli.app import main

main()
